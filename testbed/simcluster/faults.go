// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package simcluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// nftTable is the harness's table inside a node's namespace.
const nftTable = "netpulse_sim"

// faultState is what is currently injected on a node.
type faultState struct {
	partitioned bool
	muted       bool
	lossPercent int
	// lossPerMille: as lossPercent, for a background below one percent (LossPerMille).
	lossPerMille int
	// egressLossPercent: what the node sends to the other nodes is lost at random (its own
	// uplink; EgressLoss).
	egressLossPercent int
	delay             time.Duration
	// inputDelay: everything the node receives from the other nodes waits this long
	// (DelayInput; 0: none).
	inputDelay time.Duration
	// blocked: addresses the namespace neither hears from nor sends to (CutZones).
	blocked []netip.Addr
	// dropAbove: packets from the other nodes longer than this many bytes are dropped on
	// input, without an ICMP error (DropAbove; 0: none).
	dropAbove int
	// congestKbit: the node's uplink is shaped to this rate and kept full (Congest; 0:
	// none).
	congestKbit int
}

// Faults describes what is injected on a node.
type Faults struct {
	Partitioned bool
	// Muted: the node's agent cannot send to the gateway (OTLP port), see Mute.
	Muted       bool
	LossPercent int
	// LossPerMille: see LossPerMille.
	LossPerMille int
	// EgressLossPercent: see EgressLoss.
	EgressLossPercent int
	Delay             time.Duration
	// Blocked: the addresses CutZones cut the node off from.
	Blocked []netip.Addr
	// DropAbove: see DropAbove (0: none).
	DropAbove int
	// CongestKbit: see Congest (0: none).
	CongestKbit int
	// InputDelay: see DelayInput (0: none).
	InputDelay time.Duration
}

// Faults returns what is injected on node.
func (c *Cluster) Faults(node string) (Faults, error) {
	n, err := c.node(node)
	if err != nil {
		return Faults{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return Faults{Partitioned: n.faults.partitioned, Muted: n.faults.muted, LossPercent: n.faults.lossPercent, LossPerMille: n.faults.lossPerMille, EgressLossPercent: n.faults.egressLossPercent, Delay: n.faults.delay,
		Blocked: slices.Clone(n.faults.blocked), DropAbove: n.faults.dropAbove, CongestKbit: n.faults.congestKbit, InputDelay: n.faults.inputDelay}, nil
}

// Partition cuts node off from every other node: nft in the node's namespace drops all
// traffic from and to the other nodes' (and pods') addresses, IPv4 and IPv6. Traffic with
// the host side of the bridge (API server, gateway) and neighbour discovery still pass, so
// the agent keeps reporting and the neighbours stay resolved: peers see timeouts, and the
// node's own probes fail at its firewall (EPERM, error.type "permission").
func (c *Cluster) Partition(node string) error {
	return c.withNode(node, func(n *nodeState) error {
		n.faults.partitioned = true
		return applyNft(n)
	})
}

// DropAbove makes node a path-MTU black hole: nft drops, on input, every packet from the
// other nodes (and pods) longer than bytes, as a hop with a smaller MTU whose ICMP errors
// are filtered would; nothing is sent back. Smaller packets pass. 0 removes it.
func (c *Cluster) DropAbove(node string, bytes int) error {
	if bytes < 0 || bytes > 65535 {
		return fmt.Errorf("simcluster: DropAbove %d out of range [0, 65535]", bytes)
	}
	return c.withNode(node, func(n *nodeState) error {
		n.faults.dropAbove = bytes
		return applyNft(n)
	})
}

// CutZones cuts zone a off from zone b, both ways, as a failed link between two zones
// would: nft in each node's namespace drops traffic from and to every address a node of
// the other zone or its pods can have (the node's own, and its pods' of every
// generation). Each zone still reaches itself and the other zones, and every agent still
// reaches the host side (API server, gateway). Heal or HealAll ends it.
func (c *Cluster) CutZones(a, b string) error {
	if a == b {
		return fmt.Errorf("simcluster: CutZones(%q, %q): the zones must differ", a, b)
	}
	nodes := make([]Node, 0, len(c.nodes))
	for _, n := range c.nodes {
		nodes = append(nodes, n.Node)
	}
	blocks, err := zoneCutBlocks(nodes, a, b)
	if err != nil {
		return err
	}
	var errs []error
	for name, addrs := range blocks {
		errs = append(errs, c.withNode(name, func(n *nodeState) error {
			n.faults.blocked = append(n.faults.blocked, addrs...)
			return applyNft(n)
		}))
	}
	return errors.Join(errs...)
}

// zoneCutBlocks is, for each node of zone a or b, the addresses CutZones blocks on it:
// every address of the other zone's nodes and their pods.
func zoneCutBlocks(nodes []Node, a, b string) (map[string][]netip.Addr, error) {
	addrs := map[string][]netip.Addr{}
	for _, n := range nodes {
		addrs[n.Zone] = append(addrs[n.Zone], nodeAddrs(n.Index)...)
	}
	if len(addrs[a]) == 0 || len(addrs[b]) == 0 {
		return nil, fmt.Errorf("simcluster: CutZones(%q, %q): no node in one of the zones", a, b)
	}
	out := map[string][]netip.Addr{}
	for _, n := range nodes {
		switch n.Zone {
		case a:
			out[n.Name] = slices.Clone(addrs[b])
		case b:
			out[n.Name] = slices.Clone(addrs[a])
		}
	}
	return out, nil
}

// nodeAddrs is every address node i or its pods can have (podIPv4/podIPv6 generations).
func nodeAddrs(i int) []netip.Addr {
	var out []netip.Addr
	for gen := 0; gen <= 5; gen++ {
		out = append(out, podIPv4(i, gen), podIPv6(i, gen))
	}
	return out
}

// GatewayOTLPPort is the port of the gateway slot's OTLP/gRPC receiver (gateway.yaml).
const GatewayOTLPPort = 4317

// Mute silences the node's agent without touching its pod: nft in the node's namespace
// drops what it sends to the gateway's OTLP port on the host side of the bridge. The
// agent keeps running, probing and answering its readiness probe (its pod stays Ready),
// and the pod network is untouched - the gateway just stops hearing from it, as when an
// agent's export pipeline is wedged.
func (c *Cluster) Mute(node string) error {
	return c.withNode(node, func(n *nodeState) error {
		n.faults.muted = true
		return applyNft(n)
	})
}

// Loss drops percent % of the packets the node receives from the other nodes (nft
// "numgen random mod 100 < percent drop" on input): echo requests towards the node are
// lost with that probability. 0 removes the loss.
func (c *Cluster) Loss(node string, percent int) error {
	if percent < 0 || percent > 100 {
		return fmt.Errorf("simcluster: loss %d%% out of range [0, 100]", percent)
	}
	return c.withNode(node, func(n *nodeState) error {
		n.faults.lossPercent = percent
		return applyNft(n)
	})
}

// LossPerMille is Loss in thousandths, for a background loss below one percent (nft
// "numgen random mod 1000 < perMille drop" on input; 1 is the 0.1 % background).
// Loss's percent, when set, takes precedence. 0 removes it.
func (c *Cluster) LossPerMille(node string, perMille int) error {
	if perMille < 0 || perMille > 1000 {
		return fmt.Errorf("simcluster: loss %d per mille out of range [0, 1000]", perMille)
	}
	return c.withNode(node, func(n *nodeState) error {
		n.faults.lossPerMille = perMille
		return applyNft(n)
	})
}

// EgressLoss drops percent % of the packets the node sends to the other nodes (nft
// "numgen random mod 100 < percent drop" on output): its own echo requests and its replies
// to its peers' echoes are lost with that probability, the gateway's traffic spared (a
// lossy uplink of the node's own). 0 removes it.
func (c *Cluster) EgressLoss(node string, percent int) error {
	if percent < 0 || percent > 100 {
		return fmt.Errorf("simcluster: egress loss %d%% out of range [0, 100]", percent)
	}
	return c.withNode(node, func(n *nodeState) error {
		n.faults.egressLossPercent = percent
		return applyNft(n)
	})
}

// Delay makes the node answer ICMP and ICMPv6 echo requests d late: the kernel's echo
// replies are switched off in the namespace (net.ipv4.icmp_echo_ignore_all and
// net.ipv6.icmp.echo_ignore_all) and a userspace responder with raw sockets in the
// namespace answers after d. 0 restores the kernel's replies.
func (c *Cluster) Delay(node string, d time.Duration) error {
	return c.delay(node, d, nil)
}

// DelayFrom is Delay for the echo requests from the addresses from only (the others are
// answered at once, by the same responder): a slow link between the node and some peers,
// e.g. the nodes of another zone. An empty from delays nothing, 0 restores the kernel's
// replies.
func (c *Cluster) DelayFrom(node string, d time.Duration, from []netip.Addr) error {
	if from == nil {
		from = []netip.Addr{}
	}
	return c.delay(node, d, from)
}

func (c *Cluster) delay(node string, d time.Duration, from []netip.Addr) error {
	if d < 0 {
		return fmt.Errorf("simcluster: negative delay %v", d)
	}
	return c.withNode(node, func(n *nodeState) error {
		n.responder.close()
		n.responder = nil
		n.faults.delay = 0
		if d == 0 {
			return setEchoIgnore(n.Netns, false)
		}
		r, err := startEchoResponder(n.Netns, d, from)
		if err != nil {
			return fmt.Errorf("simcluster: echo responder in %s: %w", n.Netns, err)
		}
		if err := setEchoIgnore(n.Netns, true); err != nil {
			r.close()
			return err
		}
		n.responder = r
		n.faults.delay = d
		return nil
	})
}

// DelayInput holds every packet node receives from the other nodes and their pods for d
// before its kernel sees it (NFQUEUE, StartInputDelay): its peers' echo requests, TCP
// segments and HTTP requests, and the answers to its own probes, alike - a node with +d of
// latency, not only for ICMP (Delay answers echoes late from a responder). The host side of
// the bridge (API server, gateway) is not delayed. 0 removes it; Heal too.
func (c *Cluster) DelayInput(node string, d time.Duration) error {
	return c.delayInput(node, d, false)
}

// DelayAnswers is DelayInput for the other nodes' echo requests and TCP SYNs only: the node
// answers ICMP, TCP and HTTP probes d late, while its own probes are not slowed (the
// kernel's NFQUEUE; Delay does the same for ICMP from a userspace responder).
func (c *Cluster) DelayAnswers(node string, d time.Duration) error {
	return c.delayInput(node, d, true)
}

func (c *Cluster) delayInput(node string, d time.Duration, requestsOnly bool) error {
	if d < 0 {
		return fmt.Errorf("simcluster: negative input delay %v", d)
	}
	return c.withNode(node, func(n *nodeState) error {
		err := n.inputDelay.Stop()
		n.inputDelay, n.faults.inputDelay = nil, 0
		if err != nil || d == 0 {
			return err
		}
		exempt := []netip.Prefix{netip.PrefixFrom(HostIPv6, 128)}
		for i := range GatewaySlots {
			exempt = append(exempt, netip.PrefixFrom(GatewayIPv4(i), 32))
		}
		q, err := StartInputDelay(n.Netns, []netip.Prefix{Prefix4, Prefix6}, exempt, d, requestsOnly)
		if err != nil {
			return err
		}
		n.inputDelay, n.faults.inputDelay = q, d
		return nil
	})
}

// Heal removes every fault from node.
func (c *Cluster) Heal(node string) error {
	return c.withNode(node, func(n *nodeState) error { return heal(n) })
}

// HealAll removes every fault from every node and every workload.
func (c *Cluster) HealAll() error {
	var errs []error
	for _, n := range c.nodes {
		errs = append(errs, c.Heal(n.Name))
	}
	for _, w := range c.Workloads() {
		errs = append(errs, healWorkload(w))
	}
	return errors.Join(errs...)
}

// PartitionWorkload cuts a workload pod (by name, or namespace/name) off from every node
// and every other pod, as Partition does for a node: nft in the workload's namespace
// drops all traffic from and to 198.18.0.0/24 and fd00:6e70::/64 except the host side of
// the bridge (and neighbour discovery). Connections to it time out; so do its own TCP
// connections (also to ClusterIPs, which are DNATed to pod IPs first: the firewall drops
// the SYNs and TCP retransmits them), while its ICMP sends fail at once with EPERM.
// Node faults do not touch workloads (they have namespaces of their own), nor does this
// one touch the node the workload is bound to.
func (c *Cluster) PartitionWorkload(name string) error {
	w, err := c.Workload(name)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.faults.partitioned = true
	return applyNftNetns(w.Netns, w.faults)
}

// HealWorkload removes the faults of a workload pod (by name, or namespace/name).
func (c *Cluster) HealWorkload(name string) error {
	w, err := c.Workload(name)
	if err != nil {
		return err
	}
	return healWorkload(w)
}

func healWorkload(w *Workload) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.faults = faultState{}
	return applyNftNetns(w.Netns, w.faults)
}

// Partitioned reports whether PartitionWorkload is in force on the workload.
func (w *Workload) Partitioned() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.faults.partitioned
}

func heal(n *nodeState) error {
	n.faults = faultState{}
	err1 := applyNft(n)
	n.responder.close()
	n.responder = nil
	err2 := setEchoIgnore(n.Netns, false)
	err3 := n.congestion.Stop()
	n.congestion = nil
	err4 := n.inputDelay.Stop()
	n.inputDelay = nil
	return errors.Join(err1, err2, err3, err4, unshape(n.Netns))
}

func (c *Cluster) withNode(node string, fn func(*nodeState) error) error {
	n, err := c.node(node)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return fn(n)
}

func setEchoIgnore(netns string, on bool) error {
	v := "0"
	if on {
		v = "1"
	}
	return inNetns(netns, func() error {
		return errors.Join(hostSysctl("net.ipv4.icmp_echo_ignore_all", v), hostSysctl("net.ipv6.icmp.echo_ignore_all", v))
	})
}

// applyNft replaces the node's table with one rendering its fault state, atomically.
func applyNft(n *nodeState) error { return applyNftNetns(n.Netns, n.faults) }

// applyNftNetns replaces the fault table of a namespace (a node's or a workload's) with
// one rendering f, atomically.
func applyNftNetns(netns string, f faultState) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return run(ctx, []byte(nftRuleset(f)), "ip", "netns", "exec", netns, "nft", "-f", "-")
}

// nftRuleset renders the table for f (or just its removal when f injects nothing).
func nftRuleset(f faultState) string {
	var b strings.Builder
	// Create-then-delete makes the delete succeed whether or not the table exists; the
	// whole file is one transaction.
	fmt.Fprintf(&b, "table inet %s\ndelete table inet %s\n", nftTable, nftTable)
	if !f.partitioned && !f.muted && f.lossPercent == 0 && f.lossPerMille == 0 && f.egressLossPercent == 0 && len(f.blocked) == 0 && f.dropAbove == 0 {
		return b.String()
	}
	var block4, block6 []string
	for _, a := range f.blocked {
		if a.Is4() {
			block4 = append(block4, a.String())
		} else {
			block6 = append(block6, a.String())
		}
	}
	blockRules := func(dir string) {
		if len(block4) > 0 {
			fmt.Fprintf(&b, "\t\tip %s { %s } counter drop\n", dir, strings.Join(block4, ", "))
		}
		if len(block6) > 0 {
			fmt.Fprintf(&b, "\t\tip6 %s { %s } counter drop\n", dir, strings.Join(block6, ", "))
		}
	}
	p4, p6 := Prefix4.String(), Prefix6.String()
	fmt.Fprintf(&b, "table inet %s {\n", nftTable)
	// Loopback, neighbour discovery and the host side of the bridge are never affected.
	exempt := func(dir, iface, host4, host6 string) {
		fmt.Fprintf(&b, "\t\t%s %q accept\n", iface, "lo")
		b.WriteString("\t\ticmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit, nd-router-advert } accept\n")
		fmt.Fprintf(&b, "\t\tip %s %s accept\n\t\tip6 %s %s accept\n", dir, host4, dir, host6)
	}
	b.WriteString("\tchain input {\n\t\ttype filter hook input priority filter; policy accept;\n")
	hosts4 := "{ " + strings.Join(gatewayIPv4s(), ", ") + " }" // the host side: every gateway slot
	exempt("saddr", "iifname", hosts4, HostIPv6.String())
	if f.partitioned {
		fmt.Fprintf(&b, "\t\tip saddr %s counter drop\n\t\tip6 saddr %s counter drop\n", p4, p6)
	}
	blockRules("saddr")
	if f.dropAbove > 0 {
		fmt.Fprintf(&b, "\t\tip saddr %s meta length > %d counter drop\n\t\tip6 saddr %s meta length > %d counter drop\n", p4, f.dropAbove, p6, f.dropAbove)
	}
	switch {
	case f.lossPercent >= 100:
		fmt.Fprintf(&b, "\t\tip saddr %s counter drop\n\t\tip6 saddr %s counter drop\n", p4, p6)
	case f.lossPercent > 0:
		fmt.Fprintf(&b, "\t\tip saddr %s numgen random mod 100 < %d counter drop\n", p4, f.lossPercent)
		fmt.Fprintf(&b, "\t\tip6 saddr %s numgen random mod 100 < %d counter drop\n", p6, f.lossPercent)
	case f.lossPerMille >= 1000:
		fmt.Fprintf(&b, "\t\tip saddr %s counter drop\n\t\tip6 saddr %s counter drop\n", p4, p6)
	case f.lossPerMille > 0:
		fmt.Fprintf(&b, "\t\tip saddr %s numgen random mod 1000 < %d counter drop\n", p4, f.lossPerMille)
		fmt.Fprintf(&b, "\t\tip6 saddr %s numgen random mod 1000 < %d counter drop\n", p6, f.lossPerMille)
	}
	b.WriteString("\t}\n")
	if f.partitioned || f.muted || len(f.blocked) > 0 || f.egressLossPercent > 0 {
		b.WriteString("\tchain output {\n\t\ttype filter hook output priority filter; policy accept;\n")
		if f.muted { // before the host-side exemption
			fmt.Fprintf(&b, "\t\tip daddr %s tcp dport %d counter drop\n\t\tip6 daddr %s tcp dport %d counter drop\n",
				hosts4, GatewayOTLPPort, HostIPv6, GatewayOTLPPort)
		}
		exempt("daddr", "oifname", hosts4, HostIPv6.String())
		if f.partitioned {
			fmt.Fprintf(&b, "\t\tip daddr %s counter drop\n\t\tip6 daddr %s counter drop\n", p4, p6)
		}
		blockRules("daddr")
		if e := f.egressLossPercent; e > 0 {
			if e >= 100 {
				fmt.Fprintf(&b, "\t\tip daddr %s counter drop\n\t\tip6 daddr %s counter drop\n", p4, p6)
			} else {
				fmt.Fprintf(&b, "\t\tip daddr %s numgen random mod 100 < %d counter drop\n", p4, e)
				fmt.Fprintf(&b, "\t\tip6 daddr %s numgen random mod 100 < %d counter drop\n", p6, e)
			}
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// PartitionGatewayFromAPI cuts every gateway off the API server as a network partition
// would: its open API connections go silent and new ones hang (nothing is refused), while
// agents still reach the gateway and the tests' admin client still reaches the API server.
// A leading gateway loses its Lease after renew_deadline. HealGatewayFromAPI ends it.
func (c *Cluster) PartitionGatewayFromAPI() {
	c.gwAPIProxy.Cut()
	c.logf("simcluster: gateways partitioned from the API server")
}

// HealGatewayFromAPI ends PartitionGatewayFromAPI.
func (c *Cluster) HealGatewayFromAPI() {
	c.gwAPIProxy.Heal()
	c.logf("simcluster: gateways reach the API server again")
}
