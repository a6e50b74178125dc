// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podprobereceiver

import (
	"context"
	"crypto/tls"
	"errors"
	"net/netip"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/planner"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/discovery"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/icmpengine"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/metadata"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/probe"
)

// run fires one round per planned interval at this agent's jittered offset.
func (r *podProbeReceiver) run(ctx context.Context) {
	var (
		plan        *planner.Plan
		planVersion uint64
		// replanAt: when a peer still in its Ready grace period leaves it (zero: none);
		// the plan takes it in then, even if no watch event comes.
		replanAt time.Time
		members  map[string]discovery.Pod
	)
	for {
		now := time.Now()
		version := uint64(0)
		if r.watcher != nil {
			version = r.watcher.Version()
		}
		if plan == nil || version != planVersion || !replanAt.IsZero() && !now.Before(replanAt) {
			p, m, at, err := r.buildPlan(now)
			if err != nil {
				r.set.Logger.Error("pod_probe: cannot plan probes", zap.Error(err))
			} else {
				plan, members, planVersion, replanAt = p, m, version, at
			}
		}
		if plan == nil {
			if !sleep(ctx, r.cfg.Interval) {
				return
			}
			continue
		}
		round, at := plan.NextProbe(r.self, now)
		if !sleep(ctx, time.Until(at)) {
			return
		}
		// Membership may have moved while waiting; the plan is rebuilt next round.
		// Round numbers of one plan are consecutive; a gap means rounds came due while the
		// previous one still ran (a new plan may number anew).
		if plan == r.lastPlan && round > r.lastRound+1 {
			r.tb.PodProbeRounds.Add(ctx, int64(round-r.lastRound-1), metric.WithAttributes(attribute.String("outcome", "skipped")))
		}
		r.lastPlan, r.lastRound = plan, round
		r.doRound(ctx, plan, members, round)
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// buildPlan reads the current membership. The agent always counts itself in, so it probes
// even before its own pod is reported Ready.
func (r *podProbeReceiver) buildPlan(now time.Time) (*planner.Plan, map[string]discovery.Pod, time.Time, error) {
	members := map[string]discovery.Pod{}
	var list []planner.Member
	var replanAt time.Time
	if r.watcher != nil && r.cfg.Peers.Enabled {
		nodes := r.watcher.Nodes()
		var peers []discovery.Pod
		peers, replanAt = r.watcher.PeersUntil(now, r.cfg.Peers.ReadyGracePeriod)
		for _, p := range peers {
			members[p.UID] = p
			list = append(list, planner.Member{ID: p.UID, Node: p.Node, Zone: nodes[p.Node].Zone})
		}
		if _, ok := members[r.self]; !ok {
			list = append(list, planner.Member{ID: r.self, Node: r.cfg.Source.NodeName, Zone: nodes[r.cfg.Source.NodeName].Zone})
		}
	} else {
		list = []planner.Member{{ID: r.self, Node: r.cfg.Source.NodeName}}
	}
	plan, err := planner.New(list, planner.Config{K: r.cfg.K, Stable: r.cfg.StablePeers, ProbeBudget: r.cfg.ProbeBudget, BaseInterval: r.cfg.Interval})
	if err == nil {
		r.tb.PodProbePeers.Record(context.Background(), int64(len(list)))
	}
	return plan, members, replanAt, err
}

// doRound runs every probe of a round, bounded by MaxConcurrency (ICMP rounds are
// asynchronous in the shared-socket engine and need no goroutine), then emits.
func (r *podProbeReceiver) doRound(ctx context.Context, plan *planner.Plan, members map[string]discovery.Pod, round uint64) {
	started := time.Now()
	ts := r.roundTargets(plan, members, round)
	r.tb.PodProbePlannedTargets.Record(ctx, int64(len(ts)))
	if len(ts) == 0 {
		return
	}
	results := make([]observation, len(ts))
	waitMTU := func() []pathMTUResult { return nil }
	if r.pathMTUDue(round) {
		waitMTU = r.probePathMTU(ctx, ts)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, r.cfg.MaxConcurrency)
	for i, t := range ts {
		if t.addr.IsValid() {
			if err := r.policy.Check(t.addr); err != nil {
				results[i] = observation{target: t, start: time.Now(), errorType: contract.ErrorTypePermission, message: err.Error()}
				continue
			}
		}
		if t.probe == contract.ProbeTypeICMP {
			wg.Add(1)
			start := time.Now()
			err := r.engine.Submit(ctx, icmpengine.Request{
				Addr: t.addr, Count: r.cfg.ICMP.Count, Interval: r.cfg.ICMP.EchoInterval, Timeout: r.echoTimeout(),
			}, func(res icmpengine.Result, err error) {
				results[i] = icmpObservation(t, start, res, err)
				wg.Done()
			})
			if err != nil {
				results[i] = icmpObservation(t, start, icmpengine.Result{Sent: 0}, err)
				wg.Done()
			}
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			waitMTU()
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = r.probeOne(ctx, t)
		}()
	}
	wg.Wait()
	mtu := waitMTU()
	if ctx.Err() != nil {
		return // shutting down: a half-cancelled round would report false failures
	}
	for _, o := range results {
		outcome := "failure"
		if o.success {
			outcome = "success"
		}
		r.tb.PodProbeProbes.Add(ctx, 1, metric.WithAttributes(attribute.String("netpulse.probe.type", o.target.probe), attribute.String("outcome", outcome)))
	}
	r.publish(ctx, results, mtu)
	r.tb.PodProbeRounds.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "run")))
	r.tb.PodProbeRoundDuration.Record(ctx, time.Since(started).Seconds())
}

// echoTimeout is each echo's timeout, so that a round of Count echoes fits in Timeout
// (Validate guarantees it is positive).
func (r *podProbeReceiver) echoTimeout() time.Duration {
	return r.echoTimeoutFor(r.cfg.ICMP.Count)
}

func icmpObservation(t target, start time.Time, res icmpengine.Result, err error) observation {
	o := observation{target: t, start: start, sent: res.Sent, lost: res.Lost, durations: res.RTTs}
	o.success = res.Received > 0
	if !o.success {
		o.errorType = probe.Classify(err) // a deadline is a timeout, a send error its errno's
		var pe *icmpengine.ProbeError
		switch {
		case errors.As(err, &pe):
			switch pe.Kind {
			case icmpengine.KindTimeout:
				o.errorType = contract.ErrorTypeTimeout
			case icmpengine.KindUnreachable, icmpengine.KindTimeExceeded:
				o.errorType = contract.ErrorTypeUnreachable
			case icmpengine.KindPermission:
				o.errorType = contract.ErrorTypePermission
			}
		case err == nil:
			o.errorType = contract.ErrorTypeTimeout
		}
		if o.errorType == contract.ErrorTypeOther && res.Sent > 0 && res.Lost >= res.Sent {
			// Every echo went out and none came back: that is a timeout, whatever wrapped
			// it (real nodes recorded partitions' outages as Error).
			o.errorType = contract.ErrorTypeTimeout
		}
		if err != nil {
			o.message = err.Error()
		}
		if o.sent == 0 {
			o.sent, o.lost = 1, 1 // count the attempt, so loss is visible even when sending failed
		}
	}
	return o
}

func (r *podProbeReceiver) probeOne(ctx context.Context, t target) observation {
	var res probe.Result
	switch t.probe {
	case contract.ProbeTypeTCP:
		if t.addr.IsValid() {
			res = probe.TCP(ctx, netip.AddrPortFrom(t.addr, t.port), r.cfg.Timeout)
		} else {
			res = probe.TCPHost(ctx, t.host, t.port, r.cfg.Timeout, r.policy.Check)
		}
	case contract.ProbeTypeHTTP:
		var tlsCfg *tls.Config
		if t.http.InsecureSkipVerify {
			tlsCfg = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // opt-in: pod IPs are rarely in certificates
		}
		res = probe.HTTP(ctx, t.url, probe.HTTPOptions{
			Timeout: r.cfg.Timeout, ExpectedStatus: t.http.ExpectedStatus, Host: t.http.Host,
			MaxBodyBytes: t.http.MaxBodyBytes, MaxRedirects: t.http.MaxRedirects, TLS: tlsCfg,
			Policy: r.policy.Check, UserAgent: "netpulse-pod-probe/" + r.set.BuildInfo.Version,
		})
	case contract.ProbeTypeDNS:
		res = probe.DNS(ctx, probe.DNSOptions{
			Server: t.dnsServer, Name: t.dns.Name, QType: t.dns.QueryType, Protocol: t.dns.Protocol,
			Timeout: r.cfg.Timeout, AcceptNXDOMAIN: t.dns.AcceptNXDOMAIN,
		})
	}
	o := observation{target: t, start: res.Start, success: res.Success, errorType: res.ErrorType, message: res.Message}
	if res.Success {
		o.durations = []time.Duration{res.Duration}
	}
	for _, p := range res.Phases {
		o.phases = append(o.phases, phase{name: p.Name, start: p.Start, duration: p.Duration})
	}
	return o
}

func (r *podProbeReceiver) publish(ctx context.Context, results []observation, mtu []pathMTUResult) {
	now := time.Now()
	if r.metricsConsumer != nil {
		// The path-MTU verdicts carry the round's timestamp: the gateway groups a round's
		// points of one target by it.
		r.emitter.recordPathMTU(now, mtu, r.set.Logger)
		md := r.emitter.emit(now, results)
		n := md.DataPointCount()
		obsCtx := r.obs.StartMetricsOp(ctx)
		err := r.metricsConsumer.ConsumeMetrics(ctx, md)
		r.obs.EndMetricsOp(obsCtx, metadata.Type.String(), n, err)
		if err != nil {
			r.set.Logger.Warn("pod_probe: next consumer refused metrics", zap.Error(err))
		}
	}
	if r.tracesConsumer != nil && r.cfg.Spans != SpansOff {
		td := buildSpans(r.cfg, results)
		if td.SpanCount() > 0 {
			obsCtx := r.obs.StartTracesOp(ctx)
			err := r.tracesConsumer.ConsumeTraces(ctx, td)
			r.obs.EndTracesOp(obsCtx, metadata.Type.String(), td.SpanCount(), err)
			if err != nil {
				r.set.Logger.Warn("pod_probe: next consumer refused spans", zap.Error(err))
			}
		}
	}
}
