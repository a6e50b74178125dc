// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package icmpengine

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

type engineState int

const (
	stateNew engineState = iota
	stateStarted
	stateClosed
)

// Engine sends ICMP echo requests for any number of targets over one socket
// per address family. Each socket has one goroutine, an event loop that
// sends the due echo requests, reads the replies and expires probes; the
// number of sockets and goroutines does not depend on the number of targets
// or rounds. All methods are safe for concurrent use.
type Engine struct {
	cfg   Config
	epoch time.Time // monotonic reference for send times and deadlines
	wg    sync.WaitGroup

	mu     sync.Mutex
	state  engineState
	fams   [2]*family // [0] IPv4, [1] IPv6; nil when unavailable
	famErr [2]error
	rounds map[*round]struct{}
	rng    *rand.ChaCha8
	stats  Stats
}

// family is the state of one socket; all fields but drops are guarded by
// Engine.mu.
type family struct {
	*sock
	probes  map[uint16]*probe // by sequence number
	nextSeq uint16
	timers  timerHeap
	// wakeAt is when the loop will next run its timers (the socket's read
	// deadline); math.MaxInt64: no deadline; math.MinInt64: the loop is
	// running its timers and re-arms afterwards.
	wakeAt int64
	drops  atomic.Uint32 // last SO_RXQ_OVFL value
	tx     []byte        // send buffer, owned by the loop
}

type probeState uint8

const (
	probePending probeState = iota
	probeReplied
	probeTimedOut
	probeErrored
	probeCanceled
	probeSendFailed
)

type probe struct {
	r        *round
	fam      *family
	idx      int
	seq      uint16
	nonce    uint64
	sent     atomic.Int64 // ns since epoch, stored right before sendto
	deadline int64
	state    probeState
}

type round struct {
	addr        netip.Addr // as requested (may carry a zone)
	match       netip.Addr // addr without zone, compared with reply sources
	sa          unix.Sockaddr
	fam         *family
	count       int
	payload     int // ICMP payload bytes of each echo
	interval    int64
	timeout     time.Duration
	start       int64
	sent        int
	outstanding int
	probes      []*probe
	echoes      []Echo
	late, dups  int
	finished    bool
	stop        func() bool // deregisters the context.AfterFunc
	done        func(Result, error)
}

type completion struct {
	done func(Result, error)
	res  Result
	err  error
}

func deliver(cs []completion) {
	for _, c := range cs {
		c.done(c.res, c.err)
	}
}

// New validates cfg and returns an engine; sockets are opened by Start.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("icmpengine: seeding nonce generator: %w", err)
	}
	return &Engine{
		cfg:    cfg.withDefaults(),
		epoch:  time.Now(),
		rounds: make(map[*round]struct{}),
		rng:    rand.NewChaCha8(seed),
	}, nil
}

func (e *Engine) mono() int64 { return int64(time.Since(e.epoch)) }

// Start opens the sockets and starts the goroutines. Sockets are created in
// the network namespace of the calling OS thread (and stay there). ctx is
// only used during Start. Start fails if no address family could be opened;
// the error is a *PermissionError (errors.Is(err, ErrPermission)) when the
// kernel refused for lack of ping_group_range membership / CAP_NET_RAW. A
// family that failed while the other opened is reported by Info and by Ping
// errors (KindUnsupported).
func (e *Engine) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch e.state {
	case stateClosed:
		return ErrClosed
	case stateStarted:
		return errors.New("icmpengine: already started")
	}
	var fams [2]*family
	var errs [2]error
	for i, v6 := range []bool{false, true} {
		if (v6 && e.cfg.DisableIPv6) || (!v6 && e.cfg.DisableIPv4) {
			errs[i] = fmt.Errorf("%w: disabled by configuration", ErrUnsupported)
			continue
		}
		s, err := e.open(v6)
		if err != nil {
			errs[i] = err
			continue
		}
		fams[i] = &family{sock: s, probes: make(map[uint16]*probe), nextSeq: uint16(e.rng.Uint64()),
			wakeAt: math.MaxInt64, tx: make([]byte, echoHeaderLen+e.cfg.PayloadSize)}
	}
	if fams[0] == nil && fams[1] == nil {
		if !e.cfg.DisableIPv4 {
			return errs[0]
		}
		return errs[1]
	}
	e.fams, e.famErr = fams, errs
	e.state = stateStarted
	for _, f := range fams {
		if f != nil {
			e.wg.Add(1)
			go e.loop(f)
		}
	}
	return nil
}

func (e *Engine) open(v6 bool) (*sock, error) {
	ident := uint16(e.rng.Uint64()%0xfffe) + 1
	try := func(privileged bool) (*sock, error) {
		return openSocket(v6, privileged, e.cfg.ReceiveBufferBytes, ident, e.cfg.DontFragment)
	}
	switch e.cfg.Mode {
	case ModeUnprivileged:
		s, err := try(false)
		if err != nil && isPermissionErr(err) {
			return nil, e.permissionError(err, nil)
		}
		return s, err
	case ModePrivileged:
		s, err := try(true)
		if err != nil && isPermissionErr(err) {
			return nil, e.permissionError(nil, err)
		}
		return s, err
	}
	s, uerr := try(false)
	if uerr == nil {
		return s, nil
	}
	s, perr := try(true)
	if perr == nil {
		return s, nil
	}
	if isPermissionErr(uerr) && isPermissionErr(perr) {
		return nil, e.permissionError(uerr, perr)
	}
	return nil, fmt.Errorf("icmpengine: unprivileged: %w; privileged: %w", uerr, perr)
}

func (e *Engine) permissionError(unpriv, priv error) error {
	pe := &PermissionError{Mode: e.cfg.Mode, GID: os.Getegid(), Unprivileged: unpriv, Privileged: priv}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ping_group_range"); err == nil {
		pe.PingGroupRange = strings.Join(strings.Fields(string(b)), " ")
	}
	if groups, err := os.Getgroups(); err == nil {
		pe.Groups = groups
	}
	return pe
}

// Close fails the running rounds with ErrClosed, closes the sockets and
// waits for the goroutines to exit. It is safe to call more than once and
// without Start.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.state == stateClosed {
		e.mu.Unlock()
		return nil
	}
	wasStarted := e.state == stateStarted
	e.state = stateClosed
	var cs []completion
	for r := range e.rounds {
		cs = append(cs, e.cancelLocked(r, &ProbeError{Kind: KindClosed, Addr: r.addr, ICMPType: -1, Err: ErrClosed}))
	}
	fams := e.fams
	for _, f := range fams {
		if f != nil {
			f.timers = nil
		}
	}
	e.mu.Unlock()

	deliver(cs)
	if !wasStarted {
		return nil
	}
	// Closing the sockets ends the loops' reads.
	var errs []error
	for _, f := range fams {
		if f != nil {
			if err := f.close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	e.wg.Wait()
	return errors.Join(errs...)
}

// Info describes the sockets (index 0 IPv4, 1 IPv6). Before Start it is
// empty.
func (e *Engine) Info() []SocketInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state == stateNew {
		return nil
	}
	out := make([]SocketInfo, 2)
	for i, name := range []string{"ipv4", "ipv6"} {
		out[i].Family = name
		f := e.fams[i]
		if f == nil {
			out[i].Err = e.famErr[i]
			continue
		}
		out[i].Network = f.network
		out[i].Mode = ModeUnprivileged
		if f.privileged {
			out[i].Mode = ModePrivileged
		}
		out[i].Identifier = int(f.ident)
		out[i].ReceiveBufferBytes = f.rcvbuf
		out[i].ReceiveBufferForced = f.forced
		out[i].KernelTimestamps = f.kernelTS
	}
	return out
}

// Stats returns a snapshot of the engine counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.ActiveRounds = len(e.rounds)
	s.ReceiveQueueDrops = 0
	for _, f := range e.fams {
		if f != nil {
			s.ReceiveQueueDrops += uint64(f.drops.Load())
			for _, p := range f.probes {
				if p.state == probePending {
					s.PendingProbes++
				}
			}
		}
	}
	return s
}

// Ping sends count echo requests to addr, interval apart, each waiting up to
// timeout for its reply, and returns when every echo is answered or timed
// out (or ctx is done, or the engine closes). The calling goroutine only
// waits; sending and timing are done by the engine.
//
// The error is nil when at least one reply arrived (see Result.Loss for
// partial loss). Otherwise it is a *ProbeError: KindTimeout when nothing
// answered, or the last ICMP/send error (KindUnreachable, KindPermission,
// ...), or KindCanceled / KindClosed with the partial Result. Invalid
// arguments and a closed or unstarted engine return other errors
// (ErrClosed, ErrNotStarted) and an empty Result.
func (e *Engine) Ping(ctx context.Context, addr netip.Addr, count int, interval, timeout time.Duration) (Result, error) {
	ch := make(chan completion, 1)
	err := e.Submit(ctx, Request{Addr: addr, Count: count, Interval: interval, Timeout: timeout},
		func(r Result, err error) { ch <- completion{res: r, err: err} })
	if err != nil {
		return Result{Addr: addr}, err
	}
	c := <-ch
	return c.res, c.err
}

// Submit starts a round asynchronously and returns at once; done is called
// exactly once with the same values Ping would return, unless Submit itself
// returns an error (then done is never called). done runs on the event loop
// of the socket (or on the goroutine that cancels the round: the
// context.AfterFunc goroutine, or Close's caller): it must be quick and must
// not block; it may call Submit.
//
// With Submit, the number of goroutines is independent of the number of
// targets: one goroutine can keep thousands of rounds in flight.
func (e *Engine) Submit(ctx context.Context, req Request, done func(Result, error)) error {
	if done == nil {
		return errors.New("icmpengine: nil done callback")
	}
	if err := validateRequest(req); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return &ProbeError{Kind: KindCanceled, Addr: req.Addr, ICMPType: -1, Err: err}
	}
	addr := req.Addr.Unmap()
	fi := 0
	if addr.Is6() {
		fi = 1
	}
	sa, err := sockaddrFor(addr)
	if err != nil {
		return err
	}
	r := &round{
		addr:     addr,
		match:    addr.WithZone(""),
		sa:       sa,
		count:    req.Count,
		interval: int64(req.Interval),
		timeout:  req.Timeout,
		payload:  e.cfg.PayloadSize,
		probes:   make([]*probe, 0, min(req.Count, 64)),
		echoes:   make([]Echo, 0, min(req.Count, 64)),
		done:     done,
	}
	if req.Size != 0 {
		r.payload = payloadFor(req.Size, addr.Is6())
	}

	e.mu.Lock()
	switch e.state {
	case stateNew:
		e.mu.Unlock()
		return ErrNotStarted
	case stateClosed:
		e.mu.Unlock()
		return ErrClosed
	}
	r.fam = e.fams[fi]
	if r.fam == nil {
		err := e.famErr[fi]
		e.mu.Unlock()
		return &ProbeError{Kind: KindUnsupported, Addr: addr, ICMPType: -1, Err: err}
	}
	r.start = e.mono()
	e.rounds[r] = struct{}{}
	if ctx.Done() != nil {
		r.stop = context.AfterFunc(ctx, func() { e.cancel(r, context.Cause(ctx)) })
	}
	e.pushLocked(r.fam, timer{at: r.start, r: r})
	e.mu.Unlock()
	return nil
}

func validateRequest(req Request) error {
	switch {
	case !req.Addr.IsValid() || req.Addr.IsUnspecified():
		return fmt.Errorf("icmpengine: invalid address %v", req.Addr)
	case req.Count < 1 || req.Count > 1<<20:
		return fmt.Errorf("icmpengine: count must be in [1, %d], got %d", 1<<20, req.Count)
	case req.Interval < 0:
		return fmt.Errorf("icmpengine: interval must not be negative, got %v", req.Interval)
	case req.Timeout <= 0:
		return fmt.Errorf("icmpengine: timeout must be positive, got %v", req.Timeout)
	case req.Size != 0 && (payloadFor(req.Size, req.Addr.Unmap().Is6()) < MinPayloadSize || payloadFor(req.Size, req.Addr.Unmap().Is6()) > MaxPayloadSize):
		return fmt.Errorf("icmpengine: size %d bytes leaves an ICMP payload outside [%d, %d]", req.Size, MinPayloadSize, MaxPayloadSize)
	}
	return nil
}

func sockaddrFor(a netip.Addr) (unix.Sockaddr, error) {
	if a.Is4() {
		return &unix.SockaddrInet4{Addr: a.As4()}, nil
	}
	sa := &unix.SockaddrInet6{Addr: a.As16()}
	if z := a.Zone(); z != "" {
		if n, err := strconv.ParseUint(z, 10, 32); err == nil {
			sa.ZoneId = uint32(n)
		} else {
			ifi, err := net.InterfaceByName(z)
			if err != nil {
				return nil, fmt.Errorf("icmpengine: zone of %v: %w", a, err)
			}
			sa.ZoneId = uint32(ifi.Index)
		}
	}
	return sa, nil
}

// cancel ends a round because its context is done.
func (e *Engine) cancel(r *round, cause error) {
	e.mu.Lock()
	if r.finished {
		e.mu.Unlock()
		return
	}
	c := e.cancelLocked(r, &ProbeError{Kind: KindCanceled, Addr: r.addr, ICMPType: -1, Err: cause})
	e.mu.Unlock()
	c.done(c.res, c.err)
}

func (e *Engine) cancelLocked(r *round, cause *ProbeError) completion {
	for _, p := range r.probes {
		if p.state == probePending {
			p.state = probeCanceled
			r.echoes[p.idx].Status = EchoCanceled
		}
	}
	r.outstanding = 0
	r.count = r.sent
	return e.finishLocked(r, cause)
}

func (e *Engine) finishLocked(r *round, cause *ProbeError) completion {
	r.finished = true
	delete(e.rounds, r)
	if r.stop != nil {
		r.stop()
	}
	res := summarize(r.addr, r.echoes, r.late, r.dups)
	var err error
	switch {
	case cause != nil:
		err = cause
	case res.Received == 0:
		var last error
		for i := range r.echoes {
			if r.echoes[i].Err != nil {
				last = r.echoes[i].Err
			}
		}
		if last == nil {
			last = &ProbeError{Kind: KindTimeout, Addr: r.addr, ICMPType: -1, TimeoutAfter: r.timeout}
		}
		err = last
	}
	return completion{done: r.done, res: res, err: err}
}

func (e *Engine) maybeFinishLocked(r *round, cs []completion) []completion {
	if !r.finished && r.sent == r.count && r.outstanding == 0 {
		cs = append(cs, e.finishLocked(r, nil))
	}
	return cs
}

// prepareLocked registers the next echo of r (sequence number, nonce,
// deadline) and schedules the one after. The caller sends the returned
// probe after unlocking; it is nil if no sequence number was free.
func (e *Engine) prepareLocked(r *round, now int64) (*probe, []completion) {
	f := r.fam
	idx := r.sent
	r.sent++
	r.echoes = append(r.echoes, Echo{Seq: -1})
	if r.sent < r.count {
		e.pushLocked(f, timer{at: r.start + int64(r.sent)*r.interval, r: r})
	}
	e.stats.Sent++
	seq, ok := e.allocSeqLocked(f)
	if !ok {
		e.stats.SendErrors++
		r.echoes[idx].Status = EchoError
		r.echoes[idx].Err = &ProbeError{Kind: KindSend, Addr: r.addr, ICMPType: -1, Err: ErrTooManyPending}
		r.probes = append(r.probes, &probe{r: r, idx: idx, state: probeSendFailed})
		return nil, e.maybeFinishLocked(r, nil)
	}
	p := &probe{
		r:        r,
		fam:      f,
		idx:      idx,
		seq:      seq,
		nonce:    e.rng.Uint64(),
		deadline: now + int64(r.timeout),
	}
	f.probes[seq] = p
	r.probes = append(r.probes, p)
	r.echoes[idx].Seq = int(seq)
	r.outstanding++
	e.pushLocked(f, timer{at: p.deadline, p: p})
	return p, nil
}

// allocSeqLocked returns a sequence number no pending probe of f uses,
// evicting a remembered (answered/expired) probe if needed.
func (e *Engine) allocSeqLocked(f *family) (uint16, bool) {
	for range 1 << 16 {
		seq := f.nextSeq
		f.nextSeq++
		old, used := f.probes[seq]
		if !used {
			return seq, true
		}
		if old.state != probePending {
			delete(f.probes, seq)
			return seq, true
		}
	}
	return 0, false
}

// send writes the echo request of p; only the loop of p's socket calls it
// (it owns f.tx and the rounds' socket addresses). The send time is taken
// right before the sendto system call.
func (e *Engine) send(p *probe) {
	f := p.fam
	n := echoHeaderLen + p.r.payload
	if len(f.tx) < n { // a path-MTU probe; the loop owns f.tx
		f.tx = make([]byte, n)
	}
	b := f.tx[:n]
	marshalEcho(b, f.v6, f.ident, p.seq, p.nonce, f.privileged && !f.v6)
	err := f.send(b, p.r.sa, func() { p.sent.Store(e.mono()) })
	if err == nil {
		return
	}
	e.mu.Lock()
	var cs []completion
	if p.state == probePending {
		p.state = probeSendFailed
		if f.probes[p.seq] == p {
			delete(f.probes, p.seq)
		}
		e.stats.SendErrors++
		r := p.r
		r.outstanding--
		r.echoes[p.idx].Status = EchoError
		r.echoes[p.idx].Err = &ProbeError{Kind: classifySendError(err), Addr: r.addr, ICMPType: -1, Err: err}
		cs = e.maybeFinishLocked(r, cs)
	}
	e.mu.Unlock()
	deliver(cs)
}

// loop is the event loop of one socket. It waits in the runtime poller
// for the socket to become readable or for its read deadline, which is set
// to the next timer (an echo to send, a probe deadline, the end of a late
// reply window). Readable: it drains the socket. Deadline: it drains the
// socket once more (so that no reply that arrived before a deadline is
// still queued), runs the due timers and sends the due echo requests; the
// replies to those are read when the loop next waits (at once, on
// loopback). It returns when the socket is closed.
func (e *Engine) loop(f *family) {
	defer e.wg.Done()
	rx := newRxBuffers()
	handle := func(pkt *packet) { e.handle(f, pkt) }
	onDrops := func(n uint32) { f.drops.Store(n) }
	drain := func(fd uintptr) {
		if err := f.drain(int(fd), rx, handle, onDrops); err != nil {
			e.mu.Lock()
			e.stats.ReceiveErrors++
			e.mu.Unlock()
		}
	}
	var sends []*probe
	var cs []completion
	for {
		err := f.rc.Read(func(fd uintptr) bool { drain(fd); return false })
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return // closed
		}
		// Before expiring a probe, read what is queued: its reply may have
		// arrived in time since the last drain.
		e.mu.Lock()
		now := e.mono()
		expiring := f.expiringLocked(now)
		e.mu.Unlock()
		if expiring {
			if f.rc.Control(drain) != nil {
				return
			}
		}
		e.mu.Lock()
		if e.state == stateClosed {
			e.mu.Unlock()
			return
		}
		sends, cs = e.runTimersLocked(f, e.mono(), sends[:0], cs[:0])
		e.mu.Unlock()

		for _, p := range sends {
			e.send(p)
		}
		deliver(cs)
		clear(sends)
		clear(cs)

		e.mu.Lock()
		e.armLocked(f, e.mono())
		e.mu.Unlock()
	}
}

// runTimersLocked runs the timers of f due at now.
func (e *Engine) runTimersLocked(f *family, now int64, sends []*probe, cs []completion) ([]*probe, []completion) {
	// Timers pushed while we run need not move the deadline: armLocked
	// follows.
	f.wakeAt = math.MinInt64
	for len(f.timers) > 0 && f.timers[0].at <= now {
		it := f.timers.pop()
		switch {
		case it.r != nil: // next echo of a round
			if it.r.finished {
				continue
			}
			p, more := e.prepareLocked(it.r, now)
			cs = append(cs, more...)
			if p != nil {
				sends = append(sends, p)
			}
		case !it.evict: // probe deadline
			p := it.p
			if p.state == probePending {
				// The deadline was set when the echo was prepared; the
				// timeout counts from the actual send, a little later.
				if sent := p.sent.Load(); sent != 0 && sent+int64(p.r.timeout) > now {
					p.deadline = sent + int64(p.r.timeout)
					f.timers.push(timer{at: p.deadline, p: p})
					continue
				}
				cs = e.expireLocked(p, cs)
			}
			if p.state != probeSendFailed {
				f.timers.push(timer{at: p.deadline + int64(e.cfg.LateReplyWindow), p: p, evict: true})
			}
		default: // end of the late reply window
			if p := it.p; f.probes[p.seq] == p {
				delete(f.probes, p.seq)
			}
		}
	}
	return sends, cs
}

// expiringLocked reports whether a timer due at now is the deadline of a
// pending probe.
func (f *family) expiringLocked(now int64) bool {
	found := false
	f.timers.visitDue(now, func(t *timer) bool {
		found = t.p != nil && !t.evict && t.p.state == probePending
		return !found
	})
	return found
}

func (e *Engine) expireLocked(p *probe, cs []completion) []completion {
	p.state = probeTimedOut
	e.stats.Timeouts++
	r := p.r
	r.outstanding--
	r.echoes[p.idx].Status = EchoTimeout
	return e.maybeFinishLocked(r, cs)
}

// armLocked sets the read deadline of f to its next timer, but no earlier
// than now + TimerSlack, so that timers close to each other share one
// wake-up.
func (e *Engine) armLocked(f *family, now int64) {
	at := int64(math.MaxInt64)
	if len(f.timers) > 0 {
		at = max(f.timers[0].at, now+int64(e.cfg.TimerSlack))
	}
	e.setWakeLocked(f, at)
}

func (e *Engine) setWakeLocked(f *family, at int64) {
	f.wakeAt = at
	var t time.Time
	if at != math.MaxInt64 {
		t = e.epoch.Add(time.Duration(at))
	}
	_ = f.file.SetReadDeadline(t)
}

// pushLocked adds a timer to f and moves the loop's deadline if the timer
// is earlier.
func (e *Engine) pushLocked(f *family, t timer) {
	f.timers.push(t)
	if t.at < f.wakeAt {
		e.setWakeLocked(f, t.at)
	}
}

func (e *Engine) handle(f *family, pkt *packet) {
	if pkt.errQueue {
		e.handleErrQueue(f, pkt)
		return
	}
	if len(pkt.data) == 0 {
		return
	}
	if isErrorType(pkt.data[0], f.v6) {
		if ie, ok := parseICMPError(pkt.data, f.v6); ok {
			e.handleICMPError(f, ie, pkt.from)
		} else {
			e.mu.Lock()
			e.stats.StrayICMPErrors++
			e.mu.Unlock()
		}
		return
	}
	ef, ok := parseEchoReply(pkt.data, f.v6)
	now := time.Now()
	recvMono := int64(now.Sub(e.epoch))

	e.mu.Lock()
	p := f.probes[ef.seq]
	if !ok || p == nil || ef.id != f.ident || ef.nonce != p.nonce || pkt.from != p.r.match || p.sent.Load() == 0 {
		e.stats.Stray++
		e.mu.Unlock()
		return
	}
	r := p.r
	var cs []completion
	switch p.state {
	case probePending:
		rtt := recvMono - p.sent.Load()
		kernel := false
		if pkt.kts > 0 {
			// The kernel stamps CLOCK_REALTIME when the reply entered the
			// stack; subtract how long it waited for us, measured on the
			// same clock, from the monotonic user-space RTT. Fall back to
			// the user-space RTT if the wall clock stepped.
			if q := now.UnixNano() - pkt.kts; q >= 0 && q < rtt {
				rtt -= q
				kernel = true
			}
		}
		if rtt > int64(r.timeout) {
			// Arrived after the timeout; the deadline timer has not run yet.
			e.stats.Late++
			r.late++
			cs = e.expireLocked(p, cs)
			break
		}
		if kernel {
			e.stats.KernelTimestamps++
		} else {
			e.stats.UserTimestamps++
		}
		p.state = probeReplied
		e.stats.Replies++
		r.outstanding--
		r.echoes[p.idx] = Echo{Seq: int(p.seq), Status: EchoReplied, RTT: time.Duration(rtt), KernelTimestamp: kernel, From: pkt.from}
		cs = e.maybeFinishLocked(r, cs)
	case probeReplied:
		e.stats.Duplicates++
		if !r.finished {
			r.dups++
		}
	default:
		e.stats.Late++
		if !r.finished {
			r.late++
		}
	}
	e.mu.Unlock()
	deliver(cs)
}

// handleErrQueue handles an error-queue message of a datagram socket: the
// data is our echo request as sent (identifier rewritten by the kernel),
// pkt.from its destination, pkt.ee the error.
func (e *Engine) handleErrQueue(f *family, pkt *packet) {
	ef, ok := parseQuotedEcho(pkt.data, f.v6)
	if !ok {
		e.mu.Lock()
		e.stats.StrayICMPErrors++
		e.mu.Unlock()
		return
	}
	ie := icmpError{typ: -1, code: -1, dst: pkt.from, probe: ef, quotedEcho: true}
	switch pkt.ee.Origin {
	case unix.SO_EE_ORIGIN_ICMP, unix.SO_EE_ORIGIN_ICMP6:
		ie.typ, ie.code = int(pkt.ee.Type), int(pkt.ee.Code)
		ie.kind = classify(ie.typ, ie.code, f.v6)
	default: // local error (e.g. EMSGSIZE)
		ie.kind = KindSend
		if isPermissionErr(unix.Errno(pkt.ee.Errno)) {
			ie.kind = KindPermission
		}
	}
	var errno error
	if pkt.ee.Errno != 0 {
		errno = unix.Errno(pkt.ee.Errno)
	}
	e.handleICMPErrorErr(f, ie, pkt.offender, errno)
}

func (e *Engine) handleICMPError(f *family, ie icmpError, from netip.Addr) {
	e.handleICMPErrorErr(f, ie, from, nil)
}

func (e *Engine) handleICMPErrorErr(f *family, ie icmpError, from netip.Addr, errno error) {
	e.mu.Lock()
	p := f.probes[ie.probe.seq]
	if p == nil || ie.probe.id != f.ident || ie.dst != p.r.match || (ie.probe.hasNonce && ie.probe.nonce != p.nonce) {
		e.stats.StrayICMPErrors++
		e.mu.Unlock()
		return
	}
	e.stats.ICMPErrors++
	var cs []completion
	if p.state == probePending {
		r := p.r
		p.state = probeErrored
		r.outstanding--
		r.echoes[p.idx] = Echo{Seq: int(p.seq), Status: EchoError, From: from, Err: &ProbeError{
			Kind: ie.kind, Addr: r.addr, From: from, ICMPType: ie.typ, ICMPCode: ie.code, Err: errno,
		}}
		cs = e.maybeFinishLocked(r, cs)
	}
	e.mu.Unlock()
	deliver(cs)
}

// timer is a scheduler entry: the next echo of round r, the deadline of
// probe p, or (evict) the end of p's late reply window.
type timer struct {
	at    int64
	r     *round
	p     *probe
	evict bool
}

// timerHeap is a binary min-heap on at.
type timerHeap []timer

func (h *timerHeap) push(t timer) {
	*h = append(*h, t)
	s := *h
	i := len(s) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if s[parent].at <= s[i].at {
			break
		}
		s[parent], s[i] = s[i], s[parent]
		i = parent
	}
}

// visitDue calls fn for the timers due at now (in heap order, not sorted)
// until fn returns false.
func (h timerHeap) visitDue(now int64, fn func(*timer) bool) {
	var walk func(i int) bool
	walk = func(i int) bool {
		if i >= len(h) || h[i].at > now {
			return true
		}
		return fn(&h[i]) && walk(2*i+1) && walk(2*i+2)
	}
	walk(0)
}

func (h *timerHeap) pop() timer {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s[last] = timer{}
	s = s[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].at < s[m].at {
			m = l
		}
		if r < len(s) && s[r].at < s[m].at {
			m = r
		}
		if m == i {
			break
		}
		s[m], s[i] = s[i], s[m]
		i = m
	}
	*h = s
	return top
}
