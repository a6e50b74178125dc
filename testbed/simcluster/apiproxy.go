// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package simcluster

import (
	"errors"
	"io"
	"net"
	"sync"
)

// apiProxy is the gateway's way to the API server: a TCP forwarder (TLS passes through; the
// serving certificate names the host address, whatever the port) that the harness can cut.
// Cut, it behaves like a network partition rather than an API server that is down: open
// connections go silent (the API side is closed, the client side is held open and what it
// sends is discarded) and new ones are accepted and held the same way, so the gateway's
// requests time out instead of being refused. Heal closes the held connections (a TCP
// connection rarely survives a long partition) and forwards again.
type apiProxy struct {
	lis      net.Listener
	upstream string

	mu    sync.Mutex
	cut   bool
	conns map[*proxyConn]struct{}
	wg    sync.WaitGroup
}

type proxyConn struct {
	down, up net.Conn
	held     bool
}

func startAPIProxy(listen, upstream string) (*apiProxy, error) {
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p := &apiProxy{lis: lis, upstream: upstream, conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address the gateway's kubeconfig names.
func (p *apiProxy) Addr() string { return p.lis.Addr().String() }

func (p *apiProxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.lis.Accept()
		if err != nil {
			return
		}
		pc := &proxyConn{down: down}
		p.mu.Lock()
		cut := p.cut
		pc.held = cut
		p.conns[pc] = struct{}{}
		p.mu.Unlock()
		if !cut {
			if up, err := net.Dial("tcp", p.upstream); err == nil {
				p.mu.Lock()
				if p.cut { // cut while dialling
					up.Close()
				} else {
					pc.up = up
				}
				p.mu.Unlock()
			} else {
				p.drop(pc) // the API server is down: refused, as without the proxy
				continue
			}
		}
		p.wg.Add(1)
		go p.serve(pc)
	}
}

// serve copies both ways until either side ends; a held connection is only drained.
func (p *apiProxy) serve(pc *proxyConn) {
	defer p.wg.Done()
	p.mu.Lock()
	up := pc.up
	p.mu.Unlock()
	if up != nil {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(pc.down, up)
			p.mu.Lock()
			held := pc.held
			p.mu.Unlock()
			if !held {
				pc.down.Close() // the API server closed it
			}
		}()
		_, _ = io.Copy(up, pc.down)
		up.Close()
		p.mu.Lock()
		held := pc.held
		p.mu.Unlock()
		if !held {
			p.drop(pc)
			return
		}
	}
	_, _ = io.Copy(io.Discard, pc.down) // held: silence until heal closes it
	p.drop(pc)
}

func (p *apiProxy) drop(pc *proxyConn) {
	p.mu.Lock()
	delete(p.conns, pc)
	p.mu.Unlock()
	pc.down.Close()
}

// Cut partitions the gateway from the API server.
func (p *apiProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for pc := range p.conns {
		pc.held = true
		if pc.up != nil {
			pc.up.Close()
		}
	}
}

// Heal ends the partition: held connections are closed, new ones are forwarded.
func (p *apiProxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	for pc := range p.conns {
		if pc.held {
			pc.down.Close()
		}
	}
}

func (p *apiProxy) Close() error {
	err := p.lis.Close()
	p.mu.Lock()
	for pc := range p.conns {
		pc.down.Close()
		if pc.up != nil {
			pc.up.Close()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
