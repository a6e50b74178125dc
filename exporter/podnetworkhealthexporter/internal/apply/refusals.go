// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/writequeue"
)

// A 403 Forbidden is held, not dropped and not retried per key. Two causes, one rule:
//   - a restarted kube-apiserver denies every request until its RBAC caches have synced:
//     dropping those writes lost the verdicts of a partition that began while the API was
//     away (the engine had recorded them as written; nothing rewrote them until the next
//     heartbeat, TestAPIServerOutageUnderLoad);
//   - a refusal that never clears (the node-status rule dropped from the gateway's RBAC, an
//     admission webhook that denies): retrying each write on its own back-off cost 13
//     requests per decision, and nodes are re-decided every ~30 s, so from ~17 nodes the
//     update, heartbeat and cleanup lanes starved.
//
// A key whose write is answered 403 is held in the queue (its latest state kept, a newer
// Set replaces it without a request) and its kind - the key's prefix: pnh, node, pod,
// event, zone, checkstatus... - is refused. One held write of the kind at a time is retried
// (the probe): after 1 s, doubling to 5 s; once the kind has been refused for
// forbiddenPermanentAfter, to one a minute, and the refusal is surfaced (a warn log line and
// an OnForbidden call - the exporter's Event - every refusalLogEvery; the writes_forbidden
// gauge). When a probe is written, every held
// write of its kind is released at once. So a refused write costs one request, a refusal
// one request per probe interval whatever the number of held writes, and no verdict is lost
// to it. Writes of the kind that were never refused are tried as usual (a webhook that
// denies one object does not hold the others).
const (
	forbiddenProbeBase = time.Second
	forbiddenProbeMax  = 5 * time.Second
	// forbiddenPermanentAfter: an API server's RBAC caches sync within seconds of its start;
	// a kind still refused after this is refused by policy.
	forbiddenPermanentAfter = 40 * time.Second
	forbiddenProbeSlow      = time.Minute
	refusalLogEvery         = 10 * time.Minute
	// holdFor: a held write waits for its kind's probe; this is only a backstop.
	holdFor = 24 * time.Hour
	// maxHeldEvents bounds the Events held while Events are refused (they are notices, not
	// state: beyond it a refused Event is dropped as rejected).
	maxHeldEvents = 100
	eventKind     = "event"
)

// refusal is one kind of write the API answers 403 (guarded by Writer.mu). Its held keys
// are a subset of the queue's pending keys (held ones the queue's bound evicted are skipped
// when met), and there is one refusal per kind: at most a dozen.
type refusal struct {
	kind      string
	since     time.Time // first 403 since the kind was last written
	backoff   time.Duration
	probe     string          // the held key retried next ("": none)
	held      []string        // FIFO: the order probes take
	isHeld    map[string]bool // held and not the probe
	permanent bool
	logged    time.Time
}

func kindOf(key string) string {
	k, _, _ := strings.Cut(key, "/")
	return k
}

func (r *refusal) maxBackoff() time.Duration {
	if r.permanent {
		return forbiddenProbeSlow
	}
	return forbiddenProbeMax
}

// forbidden holds key's write after a 403 and schedules its kind's probe.
func (w *Writer) forbidden(key string, p writequeue.Priority, it *writeItem, err error) {
	kind := kindOf(key)
	w.mu.Lock()
	now := w.now()
	w.retries.Forget(key)
	delete(w.stale, key)
	r := w.refusals[kind]
	if r == nil {
		r = &refusal{kind: kind, since: now, backoff: forbiddenProbeBase, isHeld: map[string]bool{}}
		w.refusals[kind] = r
	}
	if !r.permanent && now.Sub(r.since) >= forbiddenPermanentAfter {
		r.permanent = true
	}
	if r.probe == key {
		r.probe = ""
		r.backoff = min(2*r.backoff, r.maxBackoff())
	}
	dropped := kind == eventKind && !r.isHeld[key] && len(r.isHeld) >= maxHeldEvents
	if dropped {
		w.queue.Done(key)
	} else {
		if drop, d := w.queue.Retry(key, p, it, now.Add(holdFor)); d {
			w.forgetLocked(drop.Key)
		}
		if !r.isHeld[key] {
			r.isHeld[key] = true
			r.held = append(r.held, key)
		}
	}
	w.probeLocked(r, now)
	logNow := r.permanent && (r.logged.IsZero() || now.Sub(r.logged) >= refusalLogEvery)
	if logNow {
		r.logged = now
	}
	held, since := r.heldLocked(), r.since
	w.notifyLocked()
	w.mu.Unlock()
	if logNow {
		w.logger.Warn("pod_network_health: the API refuses these writes (403 Forbidden); holding them and retrying one request a minute until it allows them. "+
			"Grant the gateway's RBAC (node conditions need patch on nodes/status: deploy/rbac/gateway-node-conditions.yaml), "+
			"or keep the admission policy netpulse-gateway-writes in step with the configured condition types and leader label, or fix the admission webhook that denies them",
			zap.String("kind", kind), zap.Int("held", held), zap.Duration("refused_for", now.Sub(since).Round(time.Second)), zap.Error(err))
	}
	if logNow && w.onForbidden != nil {
		w.onForbidden(kind, held, err)
	}
	w.done(WriteResult{Key: key, Reason: it.reason, Priority: p, Err: err, Forbidden: true, Rejected: dropped})
}

// OnForbidden calls fn when a kind of write has been refused for forbiddenPermanentAfter,
// and again every refusalLogEvery while it lasts (as the warn log line): the exporter
// reports it as an Event on its own pod. Register before Run.
func (w *Writer) OnForbidden(fn func(kind string, held int, err error)) { w.onForbidden = fn }

// probeLocked makes sure one held write of r's kind is due for a retry after r's back-off.
func (w *Writer) probeLocked(r *refusal, now time.Time) {
	if r.probe != "" && w.queue.Contains(r.probe) {
		return
	}
	r.probe = ""
	for len(r.held) > 0 {
		k := r.held[0]
		r.held = r.held[1:]
		if !r.isHeld[k] {
			continue
		}
		delete(r.isHeld, k)
		if w.queue.Wake(k, now.Add(r.backoff)) {
			r.probe = k
			return
		}
	}
}

// allowedLocked ends the refusal of key's kind when key, its probe, was written: every held
// write of the kind is due at once. It returns the refusal ended (nil: none).
func (w *Writer) allowedLocked(key string) *refusal {
	r := w.refusals[kindOf(key)]
	if r == nil || r.probe != key {
		return nil
	}
	for _, k := range r.held {
		if r.isHeld[k] {
			w.queue.Wake(k, time.Time{})
		}
	}
	delete(w.refusals, r.kind)
	return r
}

// reprobeLocked: key left the queue without a 403 or a write (rejected otherwise, evicted);
// if it was its kind's probe, the next held write takes its place.
func (w *Writer) reprobeLocked(key string) {
	if r := w.refusals[kindOf(key)]; r != nil && r.probe == key && !w.queue.Contains(key) {
		w.probeLocked(r, w.now())
	}
}

func (w *Writer) logCleared(key string, r *refusal) {
	if !r.permanent {
		return
	}
	w.logger.Info("pod_network_health: the API allows these writes again; the held ones are written now",
		zap.String("kind", r.kind), zap.Int("held", r.heldLocked()), zap.String("probe", key))
}

// Forbidden is the number of writes held because the API answers 403 to their kind, and
// of those, the writes of kinds refused for longer than forbiddenPermanentAfter.
func (w *Writer) Forbidden() (held, permanent int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.refusals {
		n := r.heldLocked()
		held += n
		if r.permanent {
			permanent += n
		}
	}
	return held, permanent
}

// heldLocked is the number of writes r holds, its probe included.
func (r *refusal) heldLocked() int {
	n := len(r.isHeld)
	if r.probe != "" {
		n++
	}
	return n
}
