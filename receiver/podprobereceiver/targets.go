// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podprobereceiver

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/planner"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/discovery"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/probe"
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
