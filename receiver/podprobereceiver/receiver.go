// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podprobereceiver

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"k8s.io/client-go/kubernetes"
	k8smetadata "k8s.io/client-go/metadata"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/planner"
	"github.com/netpulse/netpulse/internal/targetpolicy"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/checks"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/discovery"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/icmpengine"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/metadata"
)

// Target kinds (netpulse.target.kind).
const (
	kindPod      = contract.TargetKindPod
	kindNode     = contract.TargetKindNode
	kindExternal = contract.TargetKindExternal
)

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
		if err := r.startICMP(); err != nil {
			return err
		}
	}
	if r.cfg.Peers.Enabled || len(r.cfg.Selectors) > 0 {
		if err := r.startDiscovery(); err != nil {
			r.closeEngine()
			return err
		}
	}
	r.buildEmitter()
	if r.cfg.Checks.Enabled {
		if err := r.startChecks(); err != nil {
			r.closeEngine()
			if r.watcher != nil {
				r.watcher.Stop()
			}
			return err
		}
	}
	r.startLoops()
	return nil
}

// startICMP sizes the path-MTU echoes, opens and starts the shared-socket engine and
// registers its echo counters; it closes the engine again when the registration fails.
func (r *podProbeReceiver) startICMP() error {
	var err error
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
	return nil
}

// startDiscovery starts the informers of the peers, their nodes and the selectors' pods,
// without waiting for them to fill.
func (r *podProbeReceiver) startDiscovery() error {
	restCfg, err := r.cfg.RESTConfig("netpulse-pod-probe")
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	metaClient, err := k8smetadata.NewForConfig(restCfg)
	if err != nil {
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
	return nil
}

// buildEmitter names this agent in the plan and builds the emitter with the source pod's
// resource attributes.
func (r *podProbeReceiver) buildEmitter() {
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
}

// startLoops starts the round loop and, with informers, the one-off release of the
// memory their first LISTs held. Called with r.mu held.
func (r *podProbeReceiver) startLoops() {
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
