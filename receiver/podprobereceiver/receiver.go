// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podprobereceiver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/checks"
	"hash/fnv"
	"net/netip"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	k8smetadata "k8s.io/client-go/metadata"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/planner"
	"github.com/netpulse/netpulse/internal/targetpolicy"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/discovery"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/icmpengine"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/metadata"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/probe"
)

// Target kinds (netpulse.target.kind).
const (
	kindPod      = contract.TargetKindPod
	kindNode     = contract.TargetKindNode
	kindExternal = contract.TargetKindExternal
)

// target is one (address, port, probe type) to probe in a round.
type target struct {
	addr  netip.Addr // invalid for a host name target (static host:port or URL)
	host  string     // set when addr is invalid
	port  uint16
	probe string
	kind  string
	// stable: probed every round by this source (a stable peer, its node, a static or DNS
	// target): netpulse.pair.stable.
	stable bool
	// node: the node of a pod target, or the node target itself ("" for external
	// targets); it decides the target's gateway shard.
	node string
	url  string // http probes
	http HTTPProbeConfig
	dns  *DNSConfig
	// dnsServer is the resolved server (host:port) of a DNS probe.
	dnsServer string
}

// endpoint is netpulse.target.endpoint: what tells an external target apart from others
// on its address and port - a static URL (without user info, query or fragment), or a DNS
// question ("<name> <type>"); "" for other targets.
func (t target) endpoint() string {
	if t.kind != kindExternal {
		return ""
	}
	switch {
	case t.probe == contract.ProbeTypeHTTP && t.url != "":
		u, err := url.Parse(t.url)
		if err != nil {
			return ""
		}
		u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
		return u.String()
	case t.probe == contract.ProbeTypeDNS && t.dns != nil:
		qtype := strings.ToUpper(t.dns.QueryType)
		if qtype == "" {
			qtype = "A"
		}
		return t.dns.Name + " " + qtype
	}
	return ""
}

func (t target) addressText() string {
	if t.addr.IsValid() {
		return t.addr.String()
	}
	return t.host
}

type podProbeReceiver struct {
	set             receiver.Settings
	cfg             *Config
	metricsConsumer consumer.Metrics
	tracesConsumer  consumer.Traces
	logsConsumer    consumer.Logs

	mu       sync.Mutex
	started  bool
	shutdown bool
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	engine  *icmpengine.Engine
	watcher *discovery.Watcher
	checks  *checks.Runner
	policy  targetpolicy.Policy
	static  []target
	dns     []target
	obs     *receiverhelper.ObsReport
	emitter *emitter
	self    string
	tb      *metadata.TelemetryBuilder
	// lastPlan and lastRound: the newest round run, and its plan (rounds skipped in
	// between are counted).
	lastPlan  *planner.Plan
	lastRound uint64
	// pathMTU: the large echo size per family for path-MTU probes (0: none).
	pathMTU pathMTUSizes
}

func newReceiver(set receiver.Settings, cfg *Config) *podProbeReceiver {
	return &podProbeReceiver{set: set, cfg: cfg, policy: cfg.policy()}
}

func (c *Config) policy() targetpolicy.Policy {
	return targetpolicy.Policy{AllowLoopback: c.AllowLoopback, AllowLinkLocal: c.AllowLinkLocal}
}

// usesICMP reports whether any target source runs ICMP probes.
func (c *Config) usesICMP() bool {
	if c.Peers.Enabled && (slices.Contains(c.Peers.Probes, contract.ProbeTypeICMP) || c.Peers.NodeIPs) {
		return true
	}
	for _, s := range c.Selectors {
		if slices.Contains(s.Probes, contract.ProbeTypeICMP) {
			return true
		}
	}
	for _, s := range c.Static {
		if st, err := parseStatic(s); err == nil && slices.Contains(st.probes, contract.ProbeTypeICMP) {
			return true
		}
	}
	return false
}

// Start opens the ICMP sockets (failing fast, with the sysctl to fix, when the kernel
// refuses them), starts the informers without waiting for them, and starts the round loop.
// The pipelines share one receiver (factory.go, internal/sharedcomponent), which starts it
// once; Start is idempotent all the same.
func (r *podProbeReceiver) Start(_ context.Context, host component.Host) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started || r.shutdown {
		return nil
	}
	var err error
	r.obs, err = receiverhelper.NewObsReport(receiverhelper.ObsReportSettings{
		ReceiverID: r.set.ID, Transport: "probe", ReceiverCreateSettings: r.set,
	})
	if err != nil {
		return err
	}
	if err := r.prepareTargets(); err != nil {
		return err
	}
	if r.tb, err = metadata.NewTelemetryBuilder(r.set.TelemetrySettings); err != nil {
		return err
	}
	if r.cfg.usesICMP() {
		if r.cfg.ICMP.PathMTU.Enabled {
			if r.pathMTU, err = pathMTUSizesFor(r.cfg.ICMP.PathMTU, splitIPs(r.cfg.Source.PodIPs)); err != nil {
				return err
			}
		}
		engine, err := icmpengine.New(icmpengine.Config{
			Mode:               icmpengine.Mode(r.cfg.ICMP.Mode),
			ReceiveBufferBytes: r.cfg.ICMP.ReceiveBuffer,
			DontFragment:       r.cfg.ICMP.PathMTU.Enabled,
			DisableIPv4:        !slices.Contains(r.cfg.AddressFamilies, contract.NetworkTypeIPv4),
			DisableIPv6:        !slices.Contains(r.cfg.AddressFamilies, contract.NetworkTypeIPv6),
		})
		if err != nil {
			return fmt.Errorf("icmp: %w", err)
		}
		if err := engine.Start(context.Background()); err != nil {
			return fmt.Errorf("icmp: %w", err)
		}
		r.engine = engine
		if err := r.tb.RegisterPodProbeIcmpEchoesCallback(func(_ context.Context, o metric.Int64Observer) error {
			st := engine.Stats()
			for outcome, n := range map[string]uint64{
				"replied": st.Replies, "timed_out": st.Timeouts, "late": st.Late,
				"duplicate": st.Duplicates, "stray": st.Stray, "send_error": st.SendErrors,
			} {
				o.Observe(int64(n), metric.WithAttributes(attribute.String("outcome", outcome)))
			}
			return nil
		}); err != nil {
			r.closeEngine()
			return err
		}
	}
	if r.cfg.Peers.Enabled || len(r.cfg.Selectors) > 0 {
		restCfg, err := r.cfg.RESTConfig("netpulse-pod-probe")
		if err != nil {
			r.closeEngine()
			return err
		}
		client, err := kubernetes.NewForConfig(restCfg)
		if err != nil {
			r.closeEngine()
			return err
		}
		metaClient, err := k8smetadata.NewForConfig(restCfg)
		if err != nil {
			r.closeEngine()
			return err
		}
		opts := discovery.Options{
			Nodes:         r.cfg.Peers.Enabled && (r.cfg.Peers.ZoneFromNodes || r.cfg.Peers.NodeIPs),
			NodeAddresses: r.cfg.Peers.Enabled && r.cfg.Peers.NodeIPs,
		}
		if r.cfg.Peers.Enabled {
			ns := r.cfg.Peers.Namespace
			if ns == "" {
				ns = r.cfg.Source.Namespace
			}
			opts.Peers = &discovery.Selector{Namespace: ns, LabelSelector: r.cfg.Peers.LabelSelector}
		}
		for _, s := range r.cfg.Selectors {
			opts.Selectors = append(opts.Selectors, discovery.Selector{Namespace: s.Namespace, LabelSelector: s.LabelSelector})
		}
		r.watcher = discovery.New(client, metaClient, opts)
		r.watcher.Start()
	}

	r.self = r.cfg.Source.PodUID
	if r.self == "" {
		r.self = "self:" + r.cfg.Source.PodName
	}
	mbc := r.cfg.MetricsBuilderConfig
	rb := metadata.NewResourceBuilder(mbc.ResourceAttributes)
	rb.SetK8sPodName(r.cfg.Source.PodName)
	rb.SetK8sPodUID(r.cfg.Source.PodUID)
	rb.SetK8sNamespaceName(r.cfg.Source.Namespace)
	rb.SetK8sNodeName(r.cfg.Source.NodeName)
	if ips := splitIPs(r.cfg.Source.PodIPs); len(ips) > 0 {
		rb.SetK8sPodIP(ips[0])
	}
	r.emitter = newEmitter(metadata.NewMetricsBuilder(mbc, r.set), rb.Emit(), max(10*r.cfg.Interval, time.Hour))
	r.emitter.shardBy(r.cfg.Shards, time.Now())
	if r.cfg.Checks.Enabled {
		if err := r.startChecks(); err != nil {
			r.closeEngine()
			if r.watcher != nil {
				r.watcher.Stop()
			}
			return err
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.started = true
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.run(ctx)
	}()
	if r.watcher != nil {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			// The informers' first LISTs hold every peer pod whole before the transform
			// strips it (where the API server cannot stream lists): at 1,000 nodes tens of
			// MiB of garbage that the runtime would keep for minutes, in a container whose
			// limit is sized for the steady state. Return it to the OS once, when filled.
			if r.watcher.WaitForSync(ctx) {
				debug.FreeOSMemory()
			}
		}()
	}
	return nil
}

// Shutdown stops the loop, the informers and the sockets. Safe without Start and twice.
func (r *podProbeReceiver) Shutdown(context.Context) error {
	r.mu.Lock()
	if r.shutdown {
		r.mu.Unlock()
		return nil
	}
	r.shutdown = true
	cancel := r.cancel
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	r.wg.Wait()
	if r.checks != nil {
		r.checks.Stop()
	}
	if r.watcher != nil {
		r.watcher.Stop()
	}
	r.closeEngine()
	if r.tb != nil {
		r.tb.Shutdown()
	}
	return nil
}

func (r *podProbeReceiver) closeEngine() {
	if r.engine != nil {
		_ = r.engine.Close()
	}
}

// prepareTargets resolves the static and DNS targets once.
func (r *podProbeReceiver) prepareTargets() error {
	for i, s := range r.cfg.Static {
		st, err := parseStatic(s)
		if err != nil {
			return fmt.Errorf("static[%d]: %w", i, err)
		}
		for _, p := range st.probes {
			t := target{addr: st.addr, host: st.host, port: st.port, probe: p, kind: kindExternal, url: st.url, http: s.HTTP, stable: true}
			if p == contract.ProbeTypeICMP && !st.addr.IsValid() {
				return fmt.Errorf("static[%d]: icmp needs an IP address, got %q", i, st.host)
			}
			if p == contract.ProbeTypeHTTP && t.url == "" {
				t.url = httpURL(s.HTTP, st.host, st.port)
			}
			r.static = append(r.static, t)
		}
	}
	for i := range r.cfg.DNS {
		d := &r.cfg.DNS[i]
		server := d.Server
		if server == "" {
			conf := d.ResolvConf
			if conf == "" {
				conf = "/etc/resolv.conf"
			}
			var err error
			if server, err = probe.DefaultDNSServer(conf); err != nil {
				return fmt.Errorf("dns[%d].server: empty and %w", i, err)
			}
		}
		ap, err := netip.ParseAddrPort(server)
		t := target{probe: contract.ProbeTypeDNS, kind: kindExternal, dns: d, dnsServer: server, stable: true}
		if err == nil {
			t.addr, t.port = ap.Addr().Unmap(), ap.Port()
		} else {
			host, port, _ := splitHostPort(server)
			t.host, t.port = host, port
		}
		r.dns = append(r.dns, t)
	}
	return nil
}

func splitHostPort(s string) (string, uint16, error) {
	i := len(s) - 1
	for i >= 0 && s[i] != ':' {
		i--
	}
	if i < 0 {
		return s, 0, errors.New("no port")
	}
	n, err := strconv.Atoi(s[i+1:])
	return s[:i], uint16(n), err
}

func httpURL(h HTTPProbeConfig, host string, port uint16) string {
	scheme := h.Scheme
	if scheme == "" {
		scheme = "http"
	}
	hostport := host
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
		hostport = "[" + host + "]"
	}
	if port != 0 {
		hostport += ":" + strconv.Itoa(int(port))
	}
	path := h.Path
	if path == "" {
		path = "/"
	}
	return scheme + "://" + hostport + path
}

// run fires one round per planned interval at this agent's jittered offset.
func (r *podProbeReceiver) run(ctx context.Context) {
	var (
		plan        *planner.Plan
		planVersion uint64
		members     map[string]discovery.Pod
	)
	for {
		now := time.Now()
		version := uint64(0)
		if r.watcher != nil {
			version = r.watcher.Version()
		}
		if plan == nil || version != planVersion {
			p, m, err := r.buildPlan(now)
			if err != nil {
				r.set.Logger.Error("pod_probe: cannot plan probes", zap.Error(err))
			} else {
				plan, members, planVersion = p, m, version
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
func (r *podProbeReceiver) buildPlan(now time.Time) (*planner.Plan, map[string]discovery.Pod, error) {
	members := map[string]discovery.Pod{}
	var list []planner.Member
	if r.watcher != nil && r.cfg.Peers.Enabled {
		nodes := r.watcher.Nodes()
		for _, p := range r.watcher.Peers(now, r.cfg.Peers.ReadyGracePeriod) {
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
	return plan, members, err
}

func (r *podProbeReceiver) familyAllowed(a netip.Addr) bool {
	if a.Is4() {
		return slices.Contains(r.cfg.AddressFamilies, contract.NetworkTypeIPv4)
	}
	return slices.Contains(r.cfg.AddressFamilies, contract.NetworkTypeIPv6)
}

// roundTargets lists what this agent probes in round.
func (r *podProbeReceiver) roundTargets(plan *planner.Plan, members map[string]discovery.Pod, round uint64) []target {
	var out []target
	addPod := func(p discovery.Pod, probes []string, port uint16, h HTTPProbeConfig, kind string, stable bool) {
		for _, ip := range p.IPs {
			if !r.familyAllowed(ip) {
				continue
			}
			for _, pt := range probes {
				t := target{addr: ip, probe: pt, kind: kind, http: h, stable: stable, node: p.Node}
				if pt != contract.ProbeTypeICMP {
					t.port = port
				}
				if pt == contract.ProbeTypeHTTP {
					t.url = httpURL(h, ip.String(), port)
				}
				out = append(out, t)
			}
		}
	}
	if r.cfg.Peers.Enabled {
		var nodes map[string]discovery.Node
		if r.cfg.Peers.NodeIPs && r.watcher != nil {
			nodes = r.watcher.Nodes()
		}
		seenNodes := map[string]bool{}
		stable := plan.Stable()
		for i, m := range plan.Targets(r.self, round) {
			p, ok := members[m.ID]
			if !ok {
				continue
			}
			isStable := i < stable // the stable peers lead the round's targets
			addPod(p, r.cfg.Peers.Probes, uint16(r.cfg.Peers.Port), r.cfg.Peers.HTTP, kindPod, isStable)
			if n, ok := nodes[p.Node]; ok && !seenNodes[p.Node] && p.Node != r.cfg.Source.NodeName {
				seenNodes[p.Node] = true
				for _, ip := range n.IPs {
					if r.familyAllowed(ip) {
						out = append(out, target{addr: ip, probe: contract.ProbeTypeICMP, kind: kindNode, stable: isStable, node: p.Node})
					}
				}
			}
		}
	}
	if r.watcher != nil {
		agents := []string{r.self}
		if r.cfg.Peers.Enabled {
			agents = agents[:0]
			for id := range members {
				agents = append(agents, id)
			}
			if _, ok := members[r.self]; !ok {
				agents = append(agents, r.self)
			}
		}
		for i, s := range r.cfg.Selectors {
			k := s.Observers
			if k == 0 {
				k = r.cfg.K
			}
			for _, p := range r.watcher.SelectorPods(i, time.Now()) {
				if p.UID == r.cfg.Source.PodUID || !slices.Contains(Observers(agents, p.UID, round, k), r.self) {
					continue
				}
				var port uint16
				if needsPort(s.Probes) {
					n, err := discovery.ResolvePort(p, s.Port)
					if err != nil {
						r.set.Logger.Debug("pod_probe: selector target skipped", zap.Error(err))
						continue
					}
					port = n
				}
				addPod(p, s.Probes, port, s.HTTP, kindPod, false)
			}
		}
	}
	out = append(out, r.static...)
	out = append(out, r.dns...)
	return out
}

// Observers picks, by rendezvous hashing, the k agents that probe a selector target in a
// round: every agent computes the same set from the same membership, each target gets
// exactly min(k, agents) observers, and the set rotates every round.
func Observers(agents []string, targetID string, round uint64, k int) []string {
	if k >= len(agents) {
		return agents
	}
	type scored struct {
		id    string
		score uint64
	}
	top := make([]scored, 0, k+1)
	var rb [8]byte
	for i := range rb {
		rb[i] = byte(round >> (8 * i))
	}
	for _, a := range agents {
		h := fnv.New64a()
		_, _ = h.Write([]byte(targetID))
		_, _ = h.Write(rb[:])
		_, _ = h.Write([]byte(a))
		s := scored{a, mix64(h.Sum64())}
		i, _ := slices.BinarySearchFunc(top, s, func(x, y scored) int {
			switch {
			case x.score > y.score:
				return -1
			case x.score < y.score:
				return 1
			}
			return 0
		})
		if i < k {
			top = slices.Insert(top, i, s)
			if len(top) > k {
				top = top[:k]
			}
		}
	}
	out := make([]string, len(top))
	for i, s := range top {
		out[i] = s.id
	}
	return out
}

// mix64 is the splitmix64 finaliser: FNV's low bits are weak for short inputs.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
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
