// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package v1alpha1_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
)

// networkCheckStatusSize is the JSON size of a NetworkCheck status holding successes and
// failures entries each, outages outages of logs+logs entries, every message msgLen long.
func networkCheckStatusSize(t *testing.T, successes, failures, outages, logs, msgLen int) int {
	t.Helper()
	now := metav1.NewTime(time.Date(2026, 11, 25, 10, 0, 0, 123456789, time.UTC))
	msg := strings.Repeat("m", msgLen)
	entries := func(n int, ok bool) []v1alpha1.CheckLogEntry {
		out := make([]v1alpha1.CheckLogEntry, n)
		for i := range out {
			out[i] = v1alpha1.CheckLogEntry{Time: now, Success: ok, Reason: "TCPConnectError", Message: msg, Latency: "1.234ms"}
		}
		return out
	}
	st := v1alpha1.NetworkCheckStatus{
		ObservedGeneration: 1,
		Vantage:            &v1alpha1.CheckVantage{Mode: v1alpha1.VantageSidecar, SourcePod: "web-7d9f8c6b5-x2k4q", Node: "ip-10-0-12-34.ec2.internal", ObserverPod: "shop/web-7d9f8c6b5-x2k4q", SourceAddress: "10.244.3.17"},
		Target:             &v1alpha1.CheckResolvedTarget{Endpoint: "10.96.12.34:5432", Kind: "Service"},
		Reachability:       v1alpha1.Reachable,
		Latency:            v1alpha1.NewLatencySummary(time.Millisecond, 2*time.Millisecond, 3*time.Millisecond, 4*time.Millisecond),
		LastProbeTime:      &now,
		Successes:          entries(successes, true),
		Failures:           entries(failures, false),
		Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionAccepted, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonCheckAccepted, Message: msg, LastTransitionTime: now},
			{Type: v1alpha1.ConditionReachable, Status: metav1.ConditionTrue, Reason: "ProbeSucceeded", Message: msg, LastTransitionTime: now},
		},
	}
	for range outages {
		st.Outages = append(st.Outages, v1alpha1.CheckOutage{Start: now, End: &now, StartLogs: entries(logs, false), EndLogs: entries(logs, true), Message: msg})
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// TestNetworkCheckStatusSize: NetworkCheck keeps OpenShift's list limits (10 + 10 entries,
// 20 outages of 5 + 5), so, unlike PodNetworkHealth, its worst case is above 20 KB
// (docs/api.md says by how much). This keeps the figures measured and the worst case
// bounded by the schema's limits:
//
//	go test -run TestNetworkCheckStatusSize -v ./api/v1alpha1/
func TestNetworkCheckStatusSize(t *testing.T) {
	healthy := networkCheckStatusSize(t, 10, 0, 0, 0, 60)
	typical := networkCheckStatusSize(t, 10, 10, 20, 5, 100)
	worst := networkCheckStatusSize(t, 10, 10, 20, 5, v1alpha1.MaxMessageLength)
	t.Logf("NetworkCheck status: healthy (10 successes, 60-character messages) %d B; every list full: %d B with 100-character messages, %d B at the 256-character limit", healthy, typical, worst)
	if healthy > 4*1024 {
		t.Errorf("a healthy check's status is %d B, want at most 4 KiB", healthy)
	}
	if worst > 100*1024 {
		t.Errorf("worst-case status %d B, want at most 100 KiB (the schema's list and length limits)", worst)
	}
}
