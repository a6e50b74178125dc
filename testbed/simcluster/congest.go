// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package simcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// Congest makes the node's uplink a bottleneck, as a saturated NIC or a congested top-of-rack
// port does: what the node sends is shaped to rateKbit kbit/s with a queue of queue (tc tbf on
// its eth0), and a bulk UDP sender in its namespace offers 1.5 times that rate towards
// peer's address, so the queue stays full: every packet the node sends (its echo replies,
// its own echo requests, its reports) waits about queue, and about a third is tail-dropped.
// This kernel has no netem; tbf and a sender make the congestion itself rather than an
// imitation of it. rateKbit 0 removes it.
func (c *Cluster) Congest(node, peer string, rateKbit int, queue time.Duration) error {
	if rateKbit < 0 || rateKbit > 1_000_000 {
		return fmt.Errorf("simcluster: congest rate %d kbit/s out of range [0, 1000000]", rateKbit)
	}
	if rateKbit > 0 && (queue < time.Millisecond || queue > 10*time.Second) {
		return fmt.Errorf("simcluster: congest queue %v out of range [1ms, 10s]", queue)
	}
	p, err := c.node(peer)
	if err != nil {
		return err
	}
	return c.withNode(node, func(n *nodeState) error {
		err := n.congestion.Stop()
		n.congestion = nil
		n.faults.congestKbit = 0
		if rateKbit == 0 {
			return errors.Join(err, unshape(n.Netns))
		}
		if p.Name == n.Name {
			return fmt.Errorf("simcluster: congest %s towards itself", node)
		}
		s, err := StartCongestion(n.Netns, p.IPv4, rateKbit, queue)
		if err != nil {
			return err
		}
		n.congestion, n.faults.congestKbit = s, rateKbit
		return nil
	})
}

// Congestion is a namespace's uplink made a bottleneck (see Congest): a tbf on its eth0
// and a bulk sender keeping the queue full. The real-node cluster uses it too: its nodes'
// namespaces are made by CreateNodeNetns.
type Congestion struct {
	netns  string
	sender *bulkSender
}

// StartCongestion shapes netns's eth0 to rateKbit kbit/s with a queue of queue and starts a
// bulk UDP sender at 1.5 times that rate towards peer (its discard port).
func StartCongestion(netns string, peer netip.Addr, rateKbit int, queue time.Duration) (*Congestion, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", netns, "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf",
		"rate", strconv.Itoa(rateKbit)+"kbit", "burst", "16kb", "latency", strconv.Itoa(int(queue.Milliseconds()))+"ms").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("simcluster: tc tbf on %s: %w: %s", netns, err, out)
	}
	s, err := startBulkSender(netns, net.JoinHostPort(peer.String(), "9"), rateKbit*3/2)
	if err != nil {
		return nil, errors.Join(err, unshape(netns))
	}
	return &Congestion{netns: netns, sender: s}, nil
}

// Stop ends the sender and removes the tbf (nil: nothing to stop).
func (c *Congestion) Stop() error {
	if c == nil {
		return nil
	}
	c.sender.stop()
	return unshape(c.netns)
}

// unshape removes the node's tbf (none is no error).
func unshape(netns string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", netns, "tc", "qdisc", "show", "dev", "eth0").CombinedOutput()
	if err != nil {
		return fmt.Errorf("simcluster: tc qdisc show on %s: %w: %s", netns, err, out)
	}
	if !bytes.Contains(out, []byte("tbf")) {
		return nil
	}
	if out, err := exec.CommandContext(ctx, "ip", "netns", "exec", netns, "tc", "qdisc", "del", "dev", "eth0", "root").CombinedOutput(); err != nil {
		return fmt.Errorf("simcluster: tc qdisc del on %s: %w: %s", netns, err, out)
	}
	return nil
}

// bulkSender offers a constant UDP load from a namespace (discard port of a peer: the peer's
// answers, ICMP port unreachable, are rate-limited by its kernel).
type bulkSender struct {
	conn net.Conn
	done chan struct{}
	wg   sync.WaitGroup
}

func startBulkSender(netns, addr string, kbit int) (*bulkSender, error) {
	s := &bulkSender{done: make(chan struct{})}
	err := inNetns(netns, func() error {
		var err error
		s.conn, err = net.Dial("udp4", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("simcluster: bulk sender in %s: %w", netns, err)
	}
	const size, tick = 1200, 10 * time.Millisecond
	perTick := max(1, kbit*1000/8/size/int(time.Second/tick))
	buf := make([]byte, size)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				for range perTick {
					_, _ = s.conn.Write(buf) // a full queue refuses some: that is the point
				}
			}
		}
	}()
	return s, nil
}

func (s *bulkSender) stop() {
	if s == nil {
		return
	}
	close(s.done)
	s.wg.Wait()
	_ = s.conn.Close()
}
