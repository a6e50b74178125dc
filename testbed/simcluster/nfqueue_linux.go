// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package simcluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	nfqueue "github.com/florianl/go-nfqueue"
)

// InputDelay holds every packet a namespace receives from sources for a fixed time before
// the kernel sees it: a node whose input queues for that long (a slow NIC, a congested
// switch port one way), whatever the protocol - ICMP, TCP and HTTP probes alike, and the
// kernel's own replies. This kernel has no netem; it has NFQUEUE (the xt target, through
// iptables-nft: nft's own queue statement is not built in), so the harness queues the
// packets to a client of the queue (go-nfqueue, as kube-network-policies on the real nodes
// reads its own), which accepts each one delay after it came.
// Packets pass undelayed when the client is gone (--queue-bypass) or its queue is full
// (fail-open).
type InputDelay struct {
	netns  string
	nf     *nfqueue.Nfqueue
	cancel context.CancelFunc
	delay  time.Duration
	due    chan queued
	stop   chan struct{}
	wg     sync.WaitGroup
	// Counted: packets held and released (for tests and logs).
	mu                  sync.Mutex
	held, sent, dropped uint64
}

type queued struct {
	id  uint32
	due time.Time
}

// inputDelayChain is the iptables chain (mangle table, both families) that sends the
// packets to the queue; inputDelayQueue the queue number (queues are per namespace).
const (
	inputDelayChain = "NETPULSE-DELAY"
	inputDelayQueue = 7
)

// StartInputDelay delays by d every packet netns receives from sources, except from exempt
// (e.g. the host side of the bridge: the API server and the gateway). requestsOnly delays
// only echo requests and TCP SYNs: a node that answers d late, whose own probes are not
// slowed.
func StartInputDelay(netns string, sources, exempt []netip.Prefix, d time.Duration, requestsOnly bool) (*InputDelay, error) {
	if d <= 0 || d > 10*time.Second {
		return nil, fmt.Errorf("simcluster: input delay %v out of range (0, 10s]", d)
	}
	q := &InputDelay{netns: netns, delay: d, due: make(chan queued, 1<<16), stop: make(chan struct{})}
	ns, err := os.Open(filepath.Join("/run/netns", netns))
	if err != nil {
		return nil, fmt.Errorf("simcluster: open netns %s: %w", netns, err)
	}
	defer ns.Close()
	q.nf, err = nfqueue.Open(&nfqueue.Config{NetNS: int(ns.Fd()), NfQueue: inputDelayQueue, MaxQueueLen: 1 << 16,
		Copymode: nfqueue.NfQnlCopyMeta, Flags: nfqueue.NfQaCfgFlagFailOpen, WriteTimeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("simcluster: NFQUEUE in %s: %w", netns, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	q.cancel = cancel
	err = q.nf.RegisterWithErrorFunc(ctx, q.hold, func(error) int {
		return 0 // keep reading: ENOBUFS under load (fail-open let those packets through)
	})
	if err != nil {
		cancel()
		return nil, errors.Join(fmt.Errorf("simcluster: NFQUEUE %d in %s: %w", inputDelayQueue, netns, err), q.nf.Close())
	}
	q.wg.Add(1)
	go q.release()
	if err := setDelayRules(netns, sources, exempt, requestsOnly); err != nil {
		return nil, errors.Join(err, q.Stop())
	}
	return q, nil
}

// Stop removes the rules and ends the client (nil: nothing to stop); held packets are
// released first.
func (q *InputDelay) Stop() error {
	if q == nil {
		return nil
	}
	err := clearDelayRules(q.netns)
	close(q.stop)
	q.wg.Wait()
	q.cancel()
	return errors.Join(err, q.nf.Close())
}

// Counts returns the packets held so far, released, and not released (a verdict the
// kernel refused).
func (q *InputDelay) Counts() (held, released, failed uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held, q.sent, q.dropped
}

// hold dates a queued packet's release (the library's reading goroutine: it must not
// block; a full schedule releases the packet at once).
func (q *InputDelay) hold(a nfqueue.Attribute) int {
	if a.PacketID == nil {
		return 0
	}
	q.mu.Lock()
	q.held++
	q.mu.Unlock()
	select {
	case q.due <- queued{id: *a.PacketID, due: time.Now().Add(q.delay)}:
	default:
		q.accept(*a.PacketID)
	}
	return 0
}

// release accepts each packet when it is due (in arrival order: the delay is fixed); at
// stop, everything still held at once.
func (q *InputDelay) release() {
	defer q.wg.Done()
	for {
		select {
		case p := <-q.due:
			if wait := time.Until(p.due); wait > 0 {
				select {
				case <-time.After(wait):
				case <-q.stop:
				}
			}
			q.accept(p.id)
		case <-q.stop:
			for {
				select {
				case p := <-q.due:
					q.accept(p.id)
				default:
					return
				}
			}
		}
	}
}

func (q *InputDelay) accept(id uint32) {
	err := q.nf.SetVerdict(id, nfqueue.NfAccept)
	q.mu.Lock()
	defer q.mu.Unlock()
	if err != nil {
		q.dropped++
		return
	}
	q.sent++
}

// setDelayRules sends what netns receives from sources (not from exempt) to the queue:
// a chain of the mangle table's PREROUTING, ahead of everything (and of kube-proxy's
// nftables rules at their later priorities), per family.
func setDelayRules(netns string, sources, exempt []netip.Prefix, requestsOnly bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := clearDelayRules(netns); err != nil {
		return err
	}
	for _, fam := range []struct {
		cmd  string
		v4   bool
		echo []string
	}{{"iptables", true, []string{"-p", "icmp", "--icmp-type", "echo-request"}}, {"ip6tables", false, []string{"-p", "ipv6-icmp", "--icmpv6-type", "echo-request"}}} {
		matches := [][]string{nil}
		if requestsOnly {
			matches = [][]string{fam.echo, {"-p", "tcp", "--syn"}}
		}
		ipt := func(args ...string) error {
			return run(ctx, nil, "ip", append([]string{"netns", "exec", netns, fam.cmd, "-w", "-t", "mangle"}, args...)...)
		}
		if err := ipt("-N", inputDelayChain); err != nil {
			return err
		}
		for _, p := range exempt {
			if p.Addr().Is4() == fam.v4 {
				if err := ipt("-A", inputDelayChain, "-s", p.String(), "-j", "RETURN"); err != nil {
					return err
				}
			}
		}
		for _, p := range sources {
			if p.Addr().Is4() != fam.v4 {
				continue
			}
			for _, m := range matches {
				args := append(append([]string{"-A", inputDelayChain, "-s", p.String()}, m...), "-j", "NFQUEUE", "--queue-num", fmt.Sprint(inputDelayQueue), "--queue-bypass")
				if err := ipt(args...); err != nil {
					return err
				}
			}
		}
		if err := ipt("-I", "PREROUTING", "-j", inputDelayChain); err != nil {
			return err
		}
	}
	return nil
}

// clearDelayRules removes the chain from netns, if it is there.
func clearDelayRules(netns string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, cmd := range []string{"iptables", "ip6tables"} {
		ipt := func(args ...string) error {
			return run(ctx, nil, "ip", append([]string{"netns", "exec", netns, cmd, "-w", "-t", "mangle"}, args...)...)
		}
		if ipt("-n", "-L", inputDelayChain) != nil {
			continue // no chain
		}
		for ipt("-D", "PREROUTING", "-j", inputDelayChain) == nil {
		}
		errs = append(errs, ipt("-F", inputDelayChain), ipt("-X", inputDelayChain))
	}
	return errors.Join(errs...)
}
