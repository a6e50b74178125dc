// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checkstatus

import (
	"testing"
	"time"
)

// fullStatus is a status at every limit: 10 successes, 10 failures, 20 ended outages with
// 5 start and 5 end logs each, the newest result a success at epoch.
func fullStatus() Status {
	var st Status
	ts := epoch.Add(-24 * time.Hour)
	next := func() time.Time { ts = ts.Add(time.Minute); return ts }
	reasons := []string{ReasonTCPConnectError, ReasonDNSError, ReasonHTTPError, ReasonICMPError, ReasonTargetRefused}
	for range MaxOutages {
		for _, r := range reasons {
			st, _ = Apply(st, FlavourNetpulse, failure(next(), r))
		}
		st, _ = Apply(st, FlavourNetpulse, success(next()))
	}
	for range MaxLogEntries {
		st, _ = Apply(st, FlavourNetpulse, success(next()))
	}
	st, _ = Apply(st, FlavourNetpulse, success(epoch))
	return st
}

// BenchmarkApply: one routine success applied onto a full status.
func BenchmarkApply(b *testing.B) {
	st := fullStatus()
	if len(st.Outages) != MaxOutages || len(st.Successes) != MaxLogEntries || len(st.Failures) != MaxLogEntries ||
		len(st.Outages[MaxOutages-1].StartLogs) != MaxOutageLogs || len(st.Outages[MaxOutages-1].EndLogs) != MaxOutageLogs {
		b.Fatal("the status is not full")
	}
	e := success(epoch.Add(time.Minute))
	b.ReportAllocs()
	for b.Loop() {
		out, _ := Apply(st, FlavourNetpulse, e)
		if !out.LastResultTime.Equal(e.Time) {
			b.Fatal("not applied")
		}
	}
}
