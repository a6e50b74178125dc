// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podprobereceiver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/icmpengine"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/metadata"
)

// PathMTUConfig configures path-MTU probes: every Every rounds, each stable ICMP target
// (stable peers and their nodes, static addresses) gets
// don't-fragment echoes at Size (the path MTU the pod expects) and at SmallSize. When the
// small echoes pass and the large ones vanish without an ICMP error, the path is a black
// hole for full-size packets: TCP handshakes pass, then transfers stall.
type PathMTUConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// Every: path-MTU probes run every this many rounds (the first round included).
	Every int `mapstructure:"every"`
	// Size of the large echoes as IP packets in bytes; 0 = the MTU of the pod interface
	// that holds the source address of the family (read at start).
	Size int `mapstructure:"size"`
	// SmallSize of the control echoes; they must pass for a verdict.
	SmallSize int `mapstructure:"small_size"`
	// Count echoes of each size per probe.
	Count int `mapstructure:"count"`
}

// Defaults: at 10 s rounds, a probe per stable peer per minute: 2×2 echoes, about 6 KB.
const (
	defaultPathMTUEvery     = 6
	defaultPathMTUSmallSize = 1280 // the IPv6 minimum MTU: every IPv6 path carries it
	defaultPathMTUCount     = 2
	minPathMTUSize          = icmpengine.IPv6HeaderLen + 8 + icmpengine.MinPayloadSize
)

func (c PathMTUConfig) validate(add func(string, ...any)) {
	if !c.Enabled {
		return
	}
	if c.Every < 1 || c.Every > 1000 {
		add("icmp::path_mtu::every: %d out of range [1, 1000]", c.Every)
	}
	if c.Count < 1 || c.Count > 10 {
		add("icmp::path_mtu::count: %d out of range [1, 10]", c.Count)
	}
	if c.SmallSize < minPathMTUSize || c.SmallSize > 65535 {
		add("icmp::path_mtu::small_size: %d out of range [%d, 65535]", c.SmallSize, minPathMTUSize)
	}
	if c.Size != 0 && (c.Size <= c.SmallSize || c.Size > 65535) {
		add("icmp::path_mtu::size: %d must be 0 (the interface MTU) or in (small_size=%d, 65535]", c.Size, c.SmallSize)
	}
}

// pathMTUSizes are the large echo sizes per family (index 0 IPv4, 1 IPv6); 0 = no probes
// for the family (no source address of it).
type pathMTUSizes [2]int

// interfaceMTUs finds, per family, the MTU of the interface holding one of the pod's
// addresses (the first found); the pod's addresses come from the downward API.
func interfaceMTUs(podIPs []string) (pathMTUSizes, map[string]string, error) {
	var out pathMTUSizes
	names := map[string]string{}
	ifs, err := net.Interfaces()
	if err != nil {
		return out, nil, err
	}
	want := map[netip.Addr]bool{}
	for _, s := range podIPs {
		if a, err := netip.ParseAddr(s); err == nil {
			want[a.Unmap()] = true
		}
	}
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok || !want[ip.Unmap()] {
				continue
			}
			fi := 0
			if ip.Unmap().Is6() {
				fi = 1
			}
			if out[fi] == 0 {
				out[fi] = ifc.MTU
				names[ip.Unmap().String()] = ifc.Name
			}
		}
	}
	return out, names, nil
}

// pathMTUSizesFor resolves the large echo size of each family from the configuration and
// the pod's interfaces. A configured size above the interface's MTU is a configuration
// error: such echoes fail at the sender and would prove nothing about the path.
func pathMTUSizesFor(cfg PathMTUConfig, podIPs []string) (pathMTUSizes, error) {
	mtus, names, err := interfaceMTUs(podIPs)
	if err != nil {
		return pathMTUSizes{}, fmt.Errorf("icmp::path_mtu: reading the pod's interfaces: %w", err)
	}
	if mtus == (pathMTUSizes{}) {
		return pathMTUSizes{}, fmt.Errorf("icmp::path_mtu: no interface holds the pod's addresses %v (source.pod_ips); path-MTU probes need them to know the expected MTU", podIPs)
	}
	var out pathMTUSizes
	for fi, mtu := range mtus {
		if mtu == 0 {
			continue
		}
		size := mtu
		if cfg.Size != 0 {
			if cfg.Size > mtu {
				return pathMTUSizes{}, fmt.Errorf("icmp::path_mtu::size: %d bytes exceeds the MTU %d of the pod's %s interface %v; echoes that large cannot leave the pod", cfg.Size, mtu, []string{"IPv4", "IPv6"}[fi], names)
			}
			size = cfg.Size
		}
		if size <= cfg.SmallSize {
			continue // nothing to tell apart: the interface carries no more than the control size
		}
		out[fi] = size
	}
	return out, nil
}

// pathMTUResult is one target's path-MTU probe, decided from its two rounds.
type pathMTUResult struct {
	target target
	probed int
	status metadata.AttributeNetpulsePathMtuStatus
	// passes is the largest size known to pass: probed when it passed, else the small size.
	passes int
}

// judgePathMTU decides a path-MTU probe; ok is false when nothing can be said (the small
// echoes did not pass, or the large ones failed at the sender).
func judgePathMTU(t target, probed, small int, smallRes, largeRes icmpengine.Result, largeErr error) (pathMTUResult, bool) {
	if smallRes.Received == 0 {
		return pathMTUResult{}, false // ICMP blocked or the target down: not an MTU verdict
	}
	r := pathMTUResult{target: t, probed: probed, passes: small}
	if largeRes.Received > 0 {
		r.status, r.passes = metadata.AttributeNetpulsePathMtuStatusOk, probed
		return r, true
	}
	var pe *icmpengine.ProbeError
	switch {
	case errors.As(largeErr, &pe) && pe.Kind == icmpengine.KindPacketTooBig && !pe.From.IsValid():
		return pathMTUResult{}, false // refused by the sender's own interface
	case errors.As(largeErr, &pe) && pe.Kind == icmpengine.KindPacketTooBig:
		r.status = metadata.AttributeNetpulsePathMtuStatusFragmentationNeeded
	case errors.Is(largeErr, icmpengine.ErrTimeout) || largeErr == nil:
		r.status = metadata.AttributeNetpulsePathMtuStatusBlackHole
	default:
		return pathMTUResult{}, false // another error (unreachable, permission): not about size
	}
	return r, true
}

// pathMTUDue reports whether round runs path-MTU probes.
func (r *podProbeReceiver) pathMTUDue(round uint64) bool {
	p := r.cfg.ICMP.PathMTU
	return p.Enabled && r.engine != nil && round%uint64(p.Every) == 0
}

// probePathMTU runs the path-MTU probes of a round against its stable ICMP targets (stable
// peers and their nodes, static addresses),
// concurrently with the round's own probes; wait returns the verdicts.
func (r *podProbeReceiver) probePathMTU(ctx context.Context, ts []target) (wait func() []pathMTUResult) {
	cfg := r.cfg.ICMP.PathMTU
	var wg sync.WaitGroup
	var mu sync.Mutex
	var out []pathMTUResult
	timeout := r.echoTimeoutFor(cfg.Count)
	for _, t := range ts {
		if t.probe != contract.ProbeTypeICMP || !t.stable || !t.addr.IsValid() {
			continue
		}
		fi := 0
		if t.addr.Unmap().Is6() {
			fi = 1
		}
		large := r.pathMTU[fi]
		if large == 0 {
			continue
		}
		var smallRes, largeRes icmpengine.Result
		var largeErr error
		var pair sync.WaitGroup
		pair.Add(2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			pair.Wait()
			if res, ok := judgePathMTU(t, large, cfg.SmallSize, smallRes, largeRes, largeErr); ok {
				mu.Lock()
				out = append(out, res)
				mu.Unlock()
			}
		}()
		req := icmpengine.Request{Addr: t.addr, Count: cfg.Count, Interval: r.cfg.ICMP.EchoInterval, Timeout: timeout}
		small, big := req, req
		small.Size, big.Size = cfg.SmallSize, large
		if err := r.engine.Submit(ctx, small, func(res icmpengine.Result, _ error) { smallRes = res; pair.Done() }); err != nil {
			pair.Done()
		}
		if err := r.engine.Submit(ctx, big, func(res icmpengine.Result, err error) { largeRes, largeErr = res, err; pair.Done() }); err != nil {
			largeErr = err
			pair.Done()
		}
	}
	return func() []pathMTUResult {
		wg.Wait()
		return out
	}
}

// echoTimeoutFor is each echo's timeout so that count echoes fit in the probe timeout.
func (r *podProbeReceiver) echoTimeoutFor(count int) time.Duration {
	return r.cfg.Timeout - time.Duration(count-1)*r.cfg.ICMP.EchoInterval
}

// recordPathMTU adds the path-MTU verdicts to the next emitted metrics and logs black
// holes (the gateway and alerts act on the metric).
func (e *emitter) recordPathMTU(now time.Time, rs []pathMTUResult, logger *zap.Logger) {
	ts := pcommon.NewTimestampFromTime(now)
	for _, r := range rs {
		t := r.target
		e.own(t)
		e.mb.RecordNetpulseProbePathMtuDataPoint(ts, int64(r.passes), t.addressText(), networkType(t), metadata.AttributeNetpulseProbeTypeIcmp,
			targetKinds[t.kind], r.status, metadata.WithNetpulsePairStableMetricAttribute(t.stable))
		if r.status == metadata.AttributeNetpulsePathMtuStatusBlackHole && logger != nil {
			logger.Warn("pod_probe: path-MTU black hole: don't-fragment echoes of the expected size vanish while small ones pass",
				zap.String("target", t.addressText()), zap.Int("probed_bytes", r.probed), zap.Int("passes_bytes", r.passes))
		}
	}
}
