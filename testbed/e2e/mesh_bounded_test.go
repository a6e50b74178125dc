// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

// Bounded under any input (issue 19), end to end with the unchanged deploy/ configs: a
// compromised agent, with its own valid token and identity, floods the gateway with
// invented targets and forges cumulative counters. The gateway's series, objects and
// memory stay within their bounds and every real pair's verdict and figures hold.

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/netpulse/netpulse/testbed/simcluster"
)

const (
	// floodTargets is the flood: distinct external targets from one source.
	floodTargets = 20000
	// rssCeilingGrowthMiB: what the flood may add to the gateway's RSS (docs/figures.md).
	rssCeilingGrowthMiB = 64
	// perSourceSeriesBound: one source's stable targets (admission's default 16) x 27
	// exported series each (docs/telemetry-contract.md).
	perSourceSeriesBound = 16 * 27
)

func TestBoundedUnderAttack(t *testing.T) {
	e := requireEnv(t)
	e.requireHealthy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	agents := e.cl.Agents()
	liar := agents[0]
	client := e.dialGateway(t, e.gatewayTLS(t))
	authed := e.agentContext(ctx, t, liar)

	type snapshot struct {
		series, objects int
		rssMiB          float64
		refused         map[string]float64
		skipped         map[string]float64
		writes          float64
	}
	snap := func() snapshot {
		t.Helper()
		exported, err := scrape(ctx, gatewayExportURL)
		if err != nil {
			t.Fatal(err)
		}
		tel, err := scrape(ctx, gatewayTelemetryURL)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := e.api.objects(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s := snapshot{series: len(exported), objects: len(objs), rssMiB: rssMiB(t, e.gw.Process().Pid()),
			refused: map[string]float64{}, skipped: map[string]float64{}, writes: sum(family(tel, "otelcol_pod_network_health_api_writes"))}
		for _, p := range family(tel, metricAdmissionRefused) {
			s.refused[p.labels["reason"]] += p.value
		}
		for _, p := range family(tel, metricSkipped) {
			s.skipped[p.labels["reason"]] += p.value
		}
		return s
	}
	before := snap()

	// 1. The flood: 20,000 invented external targets, each a stable pair in the receiver's
	// shape, in pushes of 2,000 (the 4 MiB gRPC message limit refuses one push of all).
	start := time.Now()
	points := 0
	for batch := 0; batch < floodTargets; batch += 2000 {
		var targets []string
		for i := batch; i < batch+2000; i++ {
			targets = append(targets, fmt.Sprintf("203.0.%d.%d", i>>8&255, i&255))
		}
		req := roundFrom(liar, targets, time.Now(), 1, 0, true)
		points += req.Metrics().DataPointCount()
		if _, err := client.Export(authed, req); err != nil {
			t.Fatalf("flood push: %v", err)
		}
	}
	t.Logf("E2E bounded: flood of %d targets (%d data points) pushed in %v", floodTargets, points, time.Since(start).Round(time.Millisecond))

	// 2. Forged counters: a stable pair towards a real agent whose cumulative counts jump
	// by 1,000 rounds' worth of lost echoes since a start one round ago.
	victim := agents[2]
	now := time.Now()
	if _, err := client.Export(authed, roundFrom(liar, []string{victim.IPs[0].String()}, now, 3000, 3000, true)); err != nil {
		t.Fatalf("forged counters: %v", err)
	}
	attackEnd := time.Now()

	// The refusals and skips are counted before anything is stored.
	deadline := time.Now().Add(30 * time.Second)
	var after snapshot
	for {
		after = snap()
		undeclared := after.refused["undeclared_external_target"] - before.refused["undeclared_external_target"]
		implausible := after.skipped["implausible_increment"] - before.skipped["implausible_increment"]
		if undeclared >= float64(points) && implausible >= 2 {
			t.Logf("E2E bounded: %.0f data points refused as undeclared_external_target (both pipelines), %.0f increments skipped as implausible", undeclared, implausible)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the attack: undeclared_external_target grew by %.0f (want >= %d), implausible_increment by %.0f (want >= 2)", undeclared, points, implausible)
		}
		time.Sleep(500 * time.Millisecond)
	}

	// Every real pair's verdict and figures hold within two intervals of the attack's end:
	// Reachable, and no loss (the forged echoes never entered a window).
	exp := e.healthy("after the attack", attackEnd, pathExpect{stable: true})
	e.hold(t, "after the attack", exp, 5*time.Second)
	objs, err := e.api.objects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, o := range objs {
		if o.Status.LossRatio == "" {
			continue
		}
		if l, err := strconv.ParseFloat(string(o.Status.LossRatio), 64); err != nil || l > 0.05 {
			t.Errorf("%s: lossRatio %q after the attack", name, o.Status.LossRatio)
		}
	}
	after = snap()
	t.Logf("E2E bounded: exported series %d -> %d, objects %d -> %d, gateway RSS %.0f -> %.0f MiB, API writes during the attack %.0f",
		before.series, after.series, before.objects, after.objects, before.rssMiB, after.rssMiB, after.writes-before.writes)
	if after.series-before.series > perSourceSeriesBound {
		t.Errorf("exported series grew by %d, more than one source's bound %d", after.series-before.series, perSourceSeriesBound)
	}
	if after.objects > before.objects {
		t.Errorf("objects grew from %d to %d: the flood made objects", before.objects, after.objects)
	}
	if after.rssMiB-before.rssMiB > rssCeilingGrowthMiB {
		t.Errorf("gateway RSS grew by %.0f MiB, over the %d MiB ceiling", after.rssMiB-before.rssMiB, rssCeilingGrowthMiB)
	}

	// 3. What the issue found already handled, kept so: a 24 MiB request is refused
	// (gRPC's 4 MiB limit), 2,000 idle and 20 garbage connections leave the gateway up.
	var big []string
	for i := range 60000 {
		big = append(big, fmt.Sprintf("203.0.%d.%d", i>>8&255, i&255))
	}
	bigReq := roundFrom(liar, big, time.Now(), 1, 0, true)
	if raw, _ := bigReq.MarshalProto(); len(raw) < 20<<20 {
		t.Fatalf("the big request is %d bytes, want > 20 MiB", len(raw))
	}
	if _, err := client.Export(authed, bigReq); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a 24 MiB push: %v, want ResourceExhausted", err)
	}
	var conns []net.Conn
	for range 2000 {
		c, err := net.DialTimeout("tcp", e.gw.Endpoint, 5*time.Second)
		if err != nil {
			t.Fatalf("idle connection %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	for i := range 20 {
		c, err := net.DialTimeout("tcp", e.gw.Endpoint, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte(strings.Repeat("garbage\x00\xff", 100*(i+1))))
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	if _, err := client.Export(authed, roundFrom(liar, []string{victim.IPs[0].String()}, time.Now(), 3, 0, true)); err != nil {
		t.Errorf("a push with 2,020 idle and garbage connections open: %v", err)
	}
	e.hold(t, "with 2,020 idle and garbage connections", e.healthy("connections", time.Now(), pathExpect{stable: true}), 3*time.Second)
	t.Logf("E2E bounded: 24 MiB push refused, 2,020 idle and garbage connections held; gateway RSS %.0f MiB", rssMiB(t, e.gw.Process().Pid()))
}

// roundFrom is one pod_probe round in the receiver's shape from src: for each target a
// status gauge, a loss gauge and cumulative sent/lost sums (a series that started one round
// before now), marked as stable pairs or not.
func roundFrom(src simcluster.Agent, targets []string, now time.Time, sent, lost int64, stable bool) pmetricotlp.ExportRequest {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	ra := rm.Resource().Attributes()
	ra.PutStr("k8s.namespace.name", src.Namespace)
	ra.PutStr("k8s.pod.name", src.Pod)
	ra.PutStr("k8s.pod.uid", src.UID)
	ra.PutStr("k8s.node.name", src.Node)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("github.com/netpulse/netpulse/receiver/podprobereceiver")
	ts := pcommon.NewTimestampFromTime(now)
	startTS := pcommon.NewTimestampFromTime(now.Add(-500 * time.Millisecond))
	status := sm.Metrics().AppendEmpty()
	status.SetName("netpulse.probe.status")
	sg := status.SetEmptyGauge()
	loss := sm.Metrics().AppendEmpty()
	loss.SetName("netpulse.probe.loss.ratio")
	lg := loss.SetEmptyGauge()
	sum := func(name string) pmetric.NumberDataPointSlice {
		m := sm.Metrics().AppendEmpty()
		m.SetName(name)
		s := m.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		return s.DataPoints()
	}
	sentDP, lostDP := sum("netpulse.probe.packets.sent"), sum("netpulse.probe.packets.lost")
	for _, addr := range targets {
		attrs := func(m pcommon.Map) {
			m.PutStr("destination.address", addr)
			m.PutStr("network.type", "ipv4")
			m.PutStr("netpulse.probe.type", "icmp")
			m.PutStr("netpulse.target.kind", "pod")
			m.PutBool("netpulse.pair.stable", stable)
		}
		dp := sg.DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetIntValue(map[bool]int64{true: 1, false: 0}[lost < sent])
		attrs(dp.Attributes())
		lp := lg.DataPoints().AppendEmpty()
		lp.SetTimestamp(ts)
		lp.SetDoubleValue(float64(lost) / float64(sent))
		attrs(lp.Attributes())
		for _, c := range []struct {
			s pmetric.NumberDataPointSlice
			v int64
		}{{sentDP, sent}, {lostDP, lost}} {
			p := c.s.AppendEmpty()
			p.SetStartTimestamp(startTS)
			p.SetTimestamp(ts)
			p.SetIntValue(c.v)
			attrs(p.Attributes())
		}
	}
	return pmetricotlp.NewExportRequestFromMetrics(md)
}

// rssMiB reads a process's resident set.
func rssMiB(t *testing.T, pid int) float64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	t.Fatalf("no VmRSS for pid %d", pid)
	return 0
}
