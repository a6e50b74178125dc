// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package realcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"time"

	"github.com/netpulse/netpulse/testbed/simcluster"
)

// faultTable is the harness's nft table in a node's namespace (kube-proxy's are
// "kube-proxy" in the ip and ip6 families).
const faultTable = "netpulse_real_fault"

// Partition cuts node off from every other node: nft in the node's namespace drops all
// traffic between it (its address and its pods) and the other nodes and their pods, IPv4
// and IPv6, before kube-proxy's Service rules can matter (priority -300, ahead of DNAT on
// the way in, and filter on forward and output). The API server on the host side of the
// bridge stays reachable, so the node's kubelet keeps the node Ready, as in a real
// partition of the pod network that spares the control plane.
func (c *Cluster) Partition(node string) error {
	n, err := c.Node(node)
	if err != nil {
		return err
	}
	peers4, peers6 := c.peers(n)
	rules := fmt.Sprintf(`table inet %[1]s {
  set peers4 { type ipv4_addr; flags interval; elements = { %[2]s } }
  set peers6 { type ipv6_addr; flags interval; elements = { %[3]s } }
  chain prerouting { type filter hook prerouting priority -300; ip saddr @peers4 drop; ip6 saddr @peers6 drop; }
  chain forward { type filter hook forward priority -300; ip daddr @peers4 drop; ip6 daddr @peers6 drop; }
  chain output { type filter hook output priority -300; ip daddr @peers4 drop; ip6 daddr @peers6 drop; }
}
`, faultTable, strings.Join(peers4, ", "), strings.Join(peers6, ", "))
	if err := c.nft(n, []byte(dropTable+rules)); err != nil {
		return err
	}
	c.logf("realcluster: %s partitioned", node)
	return nil
}

// Loss drops percent % of what node receives from the other nodes and their pods (nft
// "numgen random mod 100 < percent drop" before anything else sees it): its peers' echo
// requests and the replies to its own echoes, each lost with that probability - a lossy
// NIC or switch port of its own. Heal removes it.
func (c *Cluster) Loss(node string, percent int) error {
	if percent < 1 || percent > 99 {
		return fmt.Errorf("realcluster: loss %d%% out of range [1, 99] (Partition drops all)", percent)
	}
	n, err := c.Node(node)
	if err != nil {
		return err
	}
	peers4, peers6 := c.peers(n)
	rules := fmt.Sprintf(`table inet %[1]s {
  set peers4 { type ipv4_addr; flags interval; elements = { %[2]s } }
  set peers6 { type ipv6_addr; flags interval; elements = { %[3]s } }
  chain prerouting { type filter hook prerouting priority -300; ip saddr @peers4 numgen random mod 100 < %[4]d counter drop; ip6 saddr @peers6 numgen random mod 100 < %[4]d counter drop; }
}
`, faultTable, strings.Join(peers4, ", "), strings.Join(peers6, ", "), percent)
	if err := c.nft(n, []byte(dropTable+rules)); err != nil {
		return err
	}
	c.logf("realcluster: %s loses %d%% of its input", node, percent)
	return nil
}

// Congest makes node's uplink a bottleneck (simcluster.StartCongestion: tc tbf on the
// node namespace's eth0 at rateKbit kbit/s with a queue of queue, and a bulk UDP sender at
// 1.5 times the rate towards peer's address): everything the node and its pods send waits
// about queue and some is tail-dropped, a saturated NIC or top-of-rack port. Heal removes
// it.
func (c *Cluster) Congest(node, peer string, rateKbit int, queue time.Duration) error {
	if rateKbit < 1 || rateKbit > 1_000_000 || queue < time.Millisecond || queue > 10*time.Second {
		return fmt.Errorf("realcluster: congest %d kbit/s, queue %v: want [1, 1000000] kbit/s and [1ms, 10s]", rateKbit, queue)
	}
	n, err := c.Node(node)
	if err != nil {
		return err
	}
	p, err := c.Node(peer)
	if err != nil {
		return err
	}
	if p == n {
		return fmt.Errorf("realcluster: congest %s towards itself", node)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.congestion.Stop(); err != nil {
		return err
	}
	n.congestion, err = simcluster.StartCongestion(n.Netns, p.IPv4, rateKbit, queue)
	if err != nil {
		return err
	}
	c.logf("realcluster: %s's uplink congested (%d kbit/s, %v queue, a bulk sender towards %s)", node, rateKbit, queue, peer)
	return nil
}

// SlowAnswers makes node answer its peers d late: the echo requests and TCP SYNs it and its
// pods receive from the other nodes and their pods wait d in the kernel's NFQUEUE
// (simcluster.StartInputDelay) before its kernel sees them, so ICMP, TCP and HTTP probes
// towards it take d longer, while its own probes do not. A node whose input queues, or a
// slow top-of-rack port one way. Heal removes it.
func (c *Cluster) SlowAnswers(node string, d time.Duration) error {
	n, err := c.Node(node)
	if err != nil {
		return err
	}
	peers4, peers6 := c.peers(n)
	var sources []netip.Prefix
	for _, p := range append(peers4, peers6...) {
		pfx, err := netip.ParsePrefix(p)
		if err != nil {
			a, aerr := netip.ParseAddr(p)
			if aerr != nil {
				return fmt.Errorf("realcluster: peer %q: %w", p, err)
			}
			pfx = netip.PrefixFrom(a, a.BitLen())
		}
		sources = append(sources, pfx)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.slow.Stop(); err != nil {
		return err
	}
	n.slow, err = simcluster.StartInputDelay(n.Netns, sources, nil, d, true)
	if err != nil {
		return err
	}
	c.logf("realcluster: %s answers its peers %v late", node, d)
	return nil
}

// peers are the addresses and pod CIDRs of every node but n.
func (c *Cluster) peers(n *Node) (peers4, peers6 []string) {
	for _, p := range c.Nodes {
		if p == n {
			continue
		}
		peers4 = append(peers4, p.IPv4.String(), p.PodCIDR4.String())
		peers6 = append(peers6, p.IPv6.String(), p.PodCIDR6.String())
	}
	return peers4, peers6
}

// Heal removes what Partition, Loss or Congest injected.
func (c *Cluster) Heal(node string) error {
	n, err := c.Node(node)
	if err != nil {
		return err
	}
	n.mu.Lock()
	err = errors.Join(n.congestion.Stop(), n.slow.Stop())
	n.congestion, n.slow = nil, nil
	n.mu.Unlock()
	if err != nil {
		return err
	}
	if err := c.nft(n, []byte(dropTable)); err != nil {
		return err
	}
	c.logf("realcluster: %s healed", node)
	return nil
}

// dropTable removes the fault table whether or not it exists (nft 1.0.6, Debian 12's,
// has no "destroy"): declaring it first makes the delete always valid.
var dropTable = "table inet " + faultTable + " {}\ndelete table inet " + faultTable + "\n"

func (c *Cluster) nft(n *Node, rules []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", n.Netns, c.Bins.Nft, "-f", "-")
	cmd.Stdin = bytes.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("realcluster: nft on %s: %w: %s", n.Name, err, bytes.TrimSpace(out))
	}
	return nil
}
