// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8sindex

import (
	"hash/maphash"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config tunes an Index.
type Config struct {
	// PodLabels are the pod label keys whose values are kept; every other label is dropped
	// before caching.
	PodLabels []string
	// DeletedPodGrace keeps the IPs of a deleted (or terminal) pod resolvable to it for this
	// long, as long as no live pod holds them, so late telemetry still resolves. 0 disables.
	DeletedPodGrace time.Duration
	// Clock returns the current time (default time.Now); tests drive grace expiry with it.
	Clock func() time.Time
}

// Index maps pod and node IPs to identities. It is the lookup core: no I/O, no
// client-go; the watcher (Watch) or a test feeds it records. All methods are safe for
// concurrent use: lookups share a read lock, updates take the write lock.
//
// Memory: a pod costs one 64-byte entry, one allocation holding its UID and name, and its
// slots in the UID and IP maps; namespace, node, workload and label values are interned and
// shared between pods. Dual-stack pods add one small slice. Pods that own no IP (pending
// without IP, host-network, terminal) are not kept at all.
type Index struct {
	mu        sync.RWMutex
	labelKeys []string
	grace     int64 // nanoseconds
	clock     func() time.Time

	// Live pods by UID. The map is keyed by a 64-bit hash of the UID (16-byte slots
	// instead of 24); the rare pod whose hash collides with another's goes to podsOverflow.
	pods         map[uint64]*podEntry
	podsOverflow map[string]*podEntry
	hashUID      func(string) uint64

	byIP    map[ipKey]*podEntry   // the pod each IP resolves to
	contest map[ipKey][]*podEntry // other live claimants of an IP (IP reuse races; rare)
	graves  map[ipKey]*grave      // IPs of deleted pods within the grace period
	graveQ  []*grave              // graves in expiry order (the grace is constant)
	graveAt int                   // first unexpired grave in graveQ

	nodes   map[string]*nodeEntry // by name; also placeholders for nodes pods name but the index has not seen
	nodeIPs map[ipKey]*nodeEntry

	namespaces map[string]string      // interned namespace names
	owners     map[uint64]*ownerEntry // by hash of (namespace, workload, labels); collisions chain
	ownerCount int
	seed       maphash.Seed

	testOwnerHash func(ns string, w Workload, labels []string) uint64 // tests force collisions
}

// ipKey is an address as a map key: 16 bytes, IPv4 in its IPv4-mapped form, no zone
// (netip.Addr is 24 bytes with a pointer).
type ipKey [16]byte

func keyOf(a netip.Addr) ipKey { return ipKey(a.As16()) }

// podEntry is the compact form of a pod: 64 bytes on 64-bit platforms.
type podEntry struct {
	uidName string      // the UID immediately followed by the name: one allocation for both
	owner   *ownerEntry // namespace, workload and configured label values (interned)
	node    *nodeEntry
	ip      ipKey    // primary IP
	more    *[]ipKey // further IPs (dual-stack); nil for single-stack pods
	created uint32   // creation time, Unix seconds
	uidLen  uint16
	flags   uint8
}

const (
	flagPhaseMask   = 0x07
	flagReady       = 0x08
	flagTerminating = 0x10
)

func (e *podEntry) uid() string  { return e.uidName[:e.uidLen] }
func (e *podEntry) name() string { return e.uidName[e.uidLen:] }
func (e *podEntry) phase() Phase { return Phase(e.flags & flagPhaseMask) }
func (e *podEntry) ready() bool  { return e.flags&flagReady != 0 }
func (e *podEntry) terminating() bool {
	return e.flags&flagTerminating != 0
}

func (e *podEntry) eachIP(fn func(ipKey)) {
	fn(e.ip)
	if e.more != nil {
		for _, ip := range *e.more {
			fn(ip)
		}
	}
}

func (e *podEntry) hasIP(ip ipKey) bool {
	if e.ip == ip {
		return true
	}
	return e.more != nil && slices.Contains(*e.more, ip)
}

func (e *podEntry) ipCount() int {
	if e.more == nil {
		return 1
	}
	return 1 + len(*e.more)
}

// better reports whether a should own a contested IP rather than b: a pod that is not
// being deleted beats one that is; then the newer pod wins (it got the IP after the other).
func better(a, b *podEntry) bool {
	if a.terminating() != b.terminating() {
		return !a.terminating()
	}
	return a.created >= b.created
}

// ownerEntry is interned per (namespace, workload, configured label values): pods of one
// workload share it. 48 bytes.
type ownerEntry struct {
	ns     string
	name   string
	labels *[]string   // nil when no labels are configured
	next   *ownerEntry // hash chain
	refs   int32
	kind   WorkloadKind
}

func (o *ownerEntry) labelValues() []string {
	if o.labels == nil {
		return nil
	}
	return *o.labels
}

func (o *ownerEntry) is(ns string, w Workload, labels []string) bool {
	return o.kind == w.Kind && o.name == w.Name && o.ns == ns && slices.Equal(o.labelValues(), labels)
}

func (ix *Index) ownerHash(ns string, w Workload, labels []string) uint64 {
	if ix.testOwnerHash != nil {
		return ix.testOwnerHash(ns, w, labels)
	}
	var h maphash.Hash
	h.SetSeed(ix.seed)
	h.WriteString(ns)
	h.WriteByte(0)
	h.WriteByte(byte(w.Kind))
	h.WriteString(w.Name)
	for _, l := range labels {
		h.WriteByte(0)
		h.WriteString(l)
	}
	return h.Sum64()
}

type nodeEntry struct {
	name   string
	zone   string
	region string
	ips    []ipKey
	refs   int32 // pod entries (live or in grace) on this node
	known  bool  // the Node object is in the index (not just named by pods)
	// cordoned, notReady: NodeRecord's.
	cordoned, notReady bool
}

type grave struct {
	e       *podEntry
	expires int64
}

// New returns an empty index.
func New(cfg Config) *Index {
	clock := cfg.Clock
	if clock == nil {
		clock = time.Now
	}
	seed := maphash.MakeSeed()
	return &Index{
		hashUID:      func(uid string) uint64 { return maphash.String(seed, uid) },
		labelKeys:    slices.Clone(cfg.PodLabels),
		grace:        int64(cfg.DeletedPodGrace),
		clock:        clock,
		pods:         make(map[uint64]*podEntry),
		podsOverflow: make(map[string]*podEntry),
		byIP:         make(map[ipKey]*podEntry),
		contest:      make(map[ipKey][]*podEntry),
		graves:       make(map[ipKey]*grave),
		nodes:        make(map[string]*nodeEntry),
		nodeIPs:      make(map[ipKey]*nodeEntry),
		namespaces:   make(map[string]string),
		owners:       make(map[uint64]*ownerEntry),
		seed:         seed,
	}
}

func (ix *Index) uidHash(uid string) uint64 { return ix.hashUID(uid) }

func (ix *Index) podByUID(uid string) *podEntry {
	if e := ix.pods[ix.uidHash(uid)]; e != nil && e.uid() == uid {
		return e
	}
	return ix.podsOverflow[uid]
}

// setPodLocked stores e under its UID, replacing the entry with the same UID.
func (ix *Index) setPodLocked(e *podEntry) {
	h := ix.uidHash(e.uid())
	if cur := ix.pods[h]; cur == nil || cur.uid() == e.uid() {
		ix.pods[h] = e
		return
	}
	ix.podsOverflow[e.uid()] = e
}

func (ix *Index) deletePodLocked(e *podEntry) {
	h := ix.uidHash(e.uid())
	if ix.pods[h] == e {
		delete(ix.pods, h)
		return
	}
	if ix.podsOverflow[e.uid()] == e {
		delete(ix.podsOverflow, e.uid())
	}
}

func (ix *Index) podCount() int { return len(ix.pods) + len(ix.podsOverflow) }

// LabelKeys are the configured pod label keys, in the order of Identity.Labels.
func (ix *Index) LabelKeys() []string { return slices.Clone(ix.labelKeys) }

func (ix *Index) now() int64 { return ix.clock().UnixNano() }

// canonical strips what never identifies a pod: IPv4-in-IPv6 mapping and zones.
func canonical(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if a.Zone() != "" {
		a = a.WithZone("")
	}
	return a
}

// ---- lookups --------------------------------------------------------------------------

// Lookup resolves one address: a live pod IP first, then a node address (host-network
// pods share their node's), then a pod deleted within the grace period. The identity's
// strings stay valid after the index changes.
func (ix *Index) Lookup(addr netip.Addr) (Identity, bool) {
	var id Identity
	ok := ix.LookupInto(addr, &id)
	return id, ok
}

// LookupInto is Lookup writing into *id (which it overwrites), to avoid copying.
func (ix *Index) LookupInto(addr netip.Addr, id *Identity) bool {
	ix.mu.RLock()
	r := Reader{ix: ix}
	ok := r.LookupInto(addr, id)
	ix.mu.RUnlock()
	return ok
}

// Read runs fn with a Reader that resolves many addresses under one read lock. fn must
// be short (it delays index updates) and must not call other Index methods.
func (ix *Index) Read(fn func(r *Reader)) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	r := Reader{ix: ix}
	fn(&r)
}

// Reader resolves addresses under a read lock held by Index.Read.
type Reader struct {
	ix  *Index
	now int64 // lazily read: only grave lookups need it
}

// Lookup is Index.Lookup without locking.
func (r *Reader) Lookup(addr netip.Addr) (id Identity, ok bool) {
	r.LookupInto(addr, &id)
	return id, id.Kind != KindNone
}

// LookupInto resolves addr into *id (overwriting it) and reports whether it resolved.
func (r *Reader) LookupInto(addr netip.Addr, id *Identity) bool {
	ix := r.ix
	if !addr.IsValid() {
		*id = Identity{}
		return false
	}
	key := keyOf(addr)
	if e := ix.byIP[key]; e != nil {
		e.fill(id, false)
		return true
	}
	if n := ix.nodeIPs[key]; n != nil {
		*id = Identity{Kind: KindNode, NodeName: n.name, Zone: n.zone, Region: n.region, NodeCordoned: n.cordoned, NodeNotReady: n.notReady}
		return true
	}
	if len(ix.graves) > 0 {
		if g := ix.graves[key]; g != nil {
			if r.now == 0 {
				r.now = ix.now()
			}
			if g.expires > r.now {
				g.e.fill(id, true)
				return true
			}
		}
	}
	*id = Identity{}
	return false
}

func (e *podEntry) fill(id *Identity, deleted bool) {
	*id = Identity{
		Kind:        KindPod,
		PodName:     e.name(),
		PodUID:      e.uid(),
		Namespace:   e.owner.ns,
		Workload:    Workload{Kind: e.owner.kind, Name: e.owner.name},
		Phase:       e.phase(),
		Ready:       e.ready(),
		Deleted:     deleted,
		Terminating: e.terminating(),
		Labels:      e.owner.labelValues(),
	}
	if e.node != nil {
		id.NodeName, id.Zone, id.Region = e.node.name, e.node.zone, e.node.region
		id.NodeCordoned, id.NodeNotReady = e.node.cordoned, e.node.notReady
	}
}

// Stats are the index's sizes.
type Stats struct {
	Pods         int // live pods that own IPs
	PodIPs       int // IPs resolving to live pods
	ContestedIPs int // IPs claimed by more than one live pod
	Graves       int // IPs resolving to deleted pods (grace period)
	Nodes        int // Node objects
	NodeIPs      int
	Workloads    int // interned (namespace, workload) entries
}

// Stats returns the current sizes.
func (ix *Index) Stats() Stats {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	s := Stats{
		Pods:         ix.podCount(),
		PodIPs:       len(ix.byIP),
		ContestedIPs: len(ix.contest),
		Graves:       len(ix.graves),
		NodeIPs:      len(ix.nodeIPs),
		Workloads:    ix.ownerCount,
	}
	for _, n := range ix.nodes {
		if n.known {
			s.Nodes++
		}
	}
	return s
}

// ---- pods -----------------------------------------------------------------------------

// UpsertPod adds or updates a pod. A record that owns no IP (no IP yet, host network,
// terminal phase) removes the pod: its IPs enter the grace period.
func (ix *Index) UpsertPod(r *PodRecord) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	now := ix.now()
	ix.expireLocked(now)
	ix.upsertLocked(r, now)
}

// DeletePod removes the pod with uid; its IPs enter the grace period.
func (ix *Index) DeletePod(uid string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	now := ix.now()
	ix.expireLocked(now)
	if e := ix.podByUID(uid); e != nil {
		ix.removeLocked(e, now)
	}
}

// ReplacePods makes records the complete set of pods (a relist): pods not among them are
// removed as if deleted.
func (ix *Index) ReplacePods(records []*PodRecord) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	now := ix.now()
	ix.expireLocked(now)
	if ix.podCount() == 0 && len(ix.byIP) == 0 {
		// Initial sync: size the maps once instead of growing them step by step.
		ix.pods = make(map[uint64]*podEntry, len(records))
		ix.byIP = make(map[ipKey]*podEntry, len(records))
	}
	seen := make(map[string]struct{}, len(records))
	for _, r := range records {
		seen[r.UID] = struct{}{}
		ix.upsertLocked(r, now)
	}
	var gone []*podEntry
	for _, e := range ix.pods {
		if _, ok := seen[e.uid()]; !ok {
			gone = append(gone, e)
		}
	}
	for _, e := range ix.podsOverflow {
		if _, ok := seen[e.uid()]; !ok {
			gone = append(gone, e)
		}
	}
	for _, e := range gone {
		ix.removeLocked(e, now)
	}
}

// Expire drops graves whose grace period is over. Updates do it too; the watcher also
// calls it periodically so that memory is released when nothing changes.
func (ix *Index) Expire() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.expireLocked(ix.now())
}

func (ix *Index) upsertLocked(r *PodRecord, now int64) {
	if r.UID == "" || len(r.UID) > 0xffff {
		return
	}
	old := ix.podByUID(r.UID)
	if !r.OwnsIPs() {
		if old != nil {
			ix.removeLocked(old, now)
		}
		return
	}
	if old != nil && old.matches(r, ix.labelKeys) {
		return // nothing the index keeps has changed (most status updates)
	}
	e := ix.newEntryLocked(r)
	ix.setPodLocked(e)
	e.eachIP(func(ip ipKey) { ix.claimLocked(ip, e, old) })
	if old != nil {
		var g *grave
		old.eachIP(func(ip ipKey) {
			if e.hasIP(ip) {
				return
			}
			// The pod gave this IP up; late telemetry may still carry it.
			if ix.releaseLocked(ip, old) && ix.grace > 0 {
				if g == nil {
					g = ix.newGraveLocked(old, now)
				}
				ix.graves[ip] = g
			}
		})
		ix.dropLocked(old)
	}
}

func (ix *Index) removeLocked(e *podEntry, now int64) {
	ix.deletePodLocked(e)
	var g *grave
	e.eachIP(func(ip ipKey) {
		if ix.releaseLocked(ip, e) && ix.grace > 0 {
			if g == nil {
				g = ix.newGraveLocked(e, now)
			}
			ix.graves[ip] = g
		}
	})
	ix.dropLocked(e)
}

// claimLocked makes e (which replaces old, if not nil) a claimant of ip.
func (ix *Index) claimLocked(ip ipKey, e, old *podEntry) {
	cur := ix.byIP[ip]
	switch {
	case cur == nil:
		ix.byIP[ip] = e
		delete(ix.graves, ip) // a live pod beats a deleted one; the grave expires on its own
	case cur == old:
		ix.byIP[ip] = e
		if len(ix.contest[ip]) > 0 {
			ix.settleLocked(ip)
		}
	default:
		others := ix.contest[ip]
		if i := slices.Index(others, old); old != nil && i >= 0 {
			others[i] = e
		} else {
			others = append(others, e)
		}
		ix.contest[ip] = others
		ix.settleLocked(ip)
	}
}

// settleLocked gives a contested ip to its best claimant.
func (ix *Index) settleLocked(ip ipKey) {
	cur, others := ix.byIP[ip], ix.contest[ip]
	best := -1
	for i, o := range others {
		if better(o, cur) && (best < 0 || better(o, others[best])) {
			best = i
		}
	}
	if best >= 0 {
		ix.byIP[ip], others[best] = others[best], cur
	}
}

// releaseLocked removes e's claim on ip and reports whether the IP is now unclaimed.
func (ix *Index) releaseLocked(ip ipKey, e *podEntry) (orphaned bool) {
	others := ix.contest[ip]
	if ix.byIP[ip] != e {
		if i := slices.Index(others, e); i >= 0 {
			others = slices.Delete(others, i, i+1)
			if len(others) == 0 {
				delete(ix.contest, ip)
			} else {
				ix.contest[ip] = others
			}
		}
		return false
	}
	if len(others) == 0 {
		delete(ix.byIP, ip)
		return true
	}
	best := 0
	for i := 1; i < len(others); i++ {
		if better(others[i], others[best]) {
			best = i
		}
	}
	ix.byIP[ip] = others[best]
	others = slices.Delete(others, best, best+1)
	if len(others) == 0 {
		delete(ix.contest, ip)
	} else {
		ix.contest[ip] = others
	}
	return false
}

func (ix *Index) newGraveLocked(e *podEntry, now int64) *grave {
	g := &grave{e: e, expires: now + ix.grace}
	ix.retainLocked(e)
	ix.graveQ = append(ix.graveQ, g)
	return g
}

func (ix *Index) expireLocked(now int64) {
	for ix.graveAt < len(ix.graveQ) && ix.graveQ[ix.graveAt].expires <= now {
		g := ix.graveQ[ix.graveAt]
		ix.graveQ[ix.graveAt] = nil
		ix.graveAt++
		g.e.eachIP(func(ip ipKey) {
			if ix.graves[ip] == g {
				delete(ix.graves, ip)
			}
		})
		ix.dropLocked(g.e)
	}
	if ix.graveAt > 64 && ix.graveAt*2 > len(ix.graveQ) {
		n := copy(ix.graveQ, ix.graveQ[ix.graveAt:])
		clear(ix.graveQ[n:])
		ix.graveQ = ix.graveQ[:n]
		ix.graveAt = 0
	}
}

func (e *podEntry) matches(r *PodRecord, labelKeys []string) bool {
	o := e.owner
	if e.name() != r.Name || o.ns != r.Namespace || o.kind != r.Workload.Kind ||
		o.name != r.Workload.Name || e.flags != recordFlags(r) || e.created != unixSeconds(r.Created) {
		return false
	}
	if (e.node == nil) != (r.NodeName == "") || (e.node != nil && e.node.name != r.NodeName) {
		return false
	}
	if e.ipCount() != len(r.IPs) || e.ip != keyOf(r.IPs[0]) {
		return false
	}
	for i, ip := range r.IPs[1:] {
		if (*e.more)[i] != keyOf(ip) {
			return false
		}
	}
	if len(labelKeys) > 0 {
		return slices.Equal(o.labelValues(), alignedLabels(r.Labels, len(labelKeys)))
	}
	return true
}

// alignedLabels returns values with exactly n elements.
func alignedLabels(values []string, n int) []string {
	if len(values) == n {
		return values
	}
	out := make([]string, n)
	copy(out, values)
	return out
}

func recordFlags(r *PodRecord) uint8 {
	f := uint8(r.Phase) & flagPhaseMask
	if r.Ready {
		f |= flagReady
	}
	if r.Terminating {
		f |= flagTerminating
	}
	return f
}

func unixSeconds(t time.Time) uint32 {
	s := t.Unix()
	if s <= 0 {
		return 0
	}
	if s > 0xffffffff {
		return 0xffffffff
	}
	return uint32(s)
}

func (ix *Index) newEntryLocked(r *PodRecord) *podEntry {
	e := &podEntry{
		uidName: r.UID + r.Name,
		uidLen:  uint16(len(r.UID)),
		ip:      keyOf(r.IPs[0]),
		flags:   recordFlags(r),
		created: unixSeconds(r.Created),
	}
	if len(r.IPs) > 1 {
		more := make([]ipKey, 0, len(r.IPs)-1)
		for _, ip := range r.IPs[1:] {
			if k := keyOf(ip); k != e.ip && !slices.Contains(more, k) {
				more = append(more, k)
			}
		}
		if len(more) > 0 {
			e.more = &more
		}
	}
	// Interned parts; retainLocked counts the references.
	var labels []string
	if len(ix.labelKeys) > 0 {
		labels = alignedLabels(r.Labels, len(ix.labelKeys))
	}
	h := ix.ownerHash(r.Namespace, r.Workload, labels)
	for o := ix.owners[h]; o != nil; o = o.next {
		if o.is(r.Namespace, r.Workload, labels) {
			e.owner = o
			break
		}
	}
	if e.owner == nil {
		ns, ok := ix.namespaces[r.Namespace]
		if !ok {
			ns = strings.Clone(r.Namespace)
			ix.namespaces[ns] = ns
		}
		o := &ownerEntry{ns: ns, kind: r.Workload.Kind, name: strings.Clone(r.Workload.Name), next: ix.owners[h]}
		if labels != nil {
			vs := make([]string, len(labels))
			for i, v := range labels {
				vs[i] = strings.Clone(v)
			}
			o.labels = &vs
		}
		ix.owners[h] = o
		ix.ownerCount++
		e.owner = o
	}
	if r.NodeName != "" {
		if e.node = ix.nodes[r.NodeName]; e.node == nil {
			e.node = &nodeEntry{name: strings.Clone(r.NodeName)}
			ix.nodes[e.node.name] = e.node
		}
	}
	ix.retainLocked(e)
	return e
}

func (ix *Index) retainLocked(e *podEntry) {
	e.owner.refs++
	if e.node != nil {
		e.node.refs++
	}
}

// dropLocked releases one reference of e to its interned parts.
func (ix *Index) dropLocked(e *podEntry) {
	if o := e.owner; o.refs <= 1 {
		ix.unlinkOwnerLocked(o)
	} else {
		o.refs--
	}
	if n := e.node; n != nil {
		if n.refs--; n.refs <= 0 && !n.known {
			delete(ix.nodes, n.name)
		}
	}
}

func (ix *Index) unlinkOwnerLocked(o *ownerEntry) {
	h := ix.ownerHash(o.ns, Workload{Kind: o.kind, Name: o.name}, o.labelValues())
	var prev *ownerEntry
	for cur := ix.owners[h]; cur != nil; prev, cur = cur, cur.next {
		if cur != o {
			continue
		}
		switch {
		case prev != nil:
			prev.next = cur.next
		case cur.next != nil:
			ix.owners[h] = cur.next
		default:
			delete(ix.owners, h)
		}
		o.refs, o.next = 0, nil
		ix.ownerCount--
		return
	}
}

// ---- nodes ----------------------------------------------------------------------------

// UpsertNode adds or updates a node.
func (ix *Index) UpsertNode(r *NodeRecord) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.upsertNodeLocked(r)
}

// DeleteNode removes a node's addresses; pods on it keep their node name.
func (ix *Index) DeleteNode(name string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.deleteNodeLocked(name)
}

// ReplaceNodes makes records the complete set of nodes.
func (ix *Index) ReplaceNodes(records []*NodeRecord) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	seen := make(map[string]struct{}, len(records))
	for _, r := range records {
		seen[r.Name] = struct{}{}
		ix.upsertNodeLocked(r)
	}
	for name, n := range ix.nodes {
		if _, ok := seen[name]; !ok && n.known {
			ix.deleteNodeLocked(name)
		}
	}
}

func (ix *Index) upsertNodeLocked(r *NodeRecord) {
	if r.Name == "" {
		return
	}
	n := ix.nodes[r.Name]
	if n == nil {
		n = &nodeEntry{name: strings.Clone(r.Name)}
		ix.nodes[n.name] = n
	}
	n.known = true
	n.cordoned, n.notReady = r.Cordoned, r.NotReady
	if n.zone != r.Zone {
		n.zone = strings.Clone(r.Zone)
	}
	if n.region != r.Region {
		n.region = strings.Clone(r.Region)
	}
	ips := make([]ipKey, 0, len(r.IPs))
	for _, ip := range r.IPs {
		if k := keyOf(ip); ip.IsValid() && !slices.Contains(ips, k) {
			ips = append(ips, k)
		}
	}
	for _, ip := range n.ips {
		if !slices.Contains(ips, ip) && ix.nodeIPs[ip] == n {
			delete(ix.nodeIPs, ip)
		}
	}
	for _, ip := range ips {
		ix.nodeIPs[ip] = n
	}
	n.ips = ips
}

func (ix *Index) deleteNodeLocked(name string) {
	n := ix.nodes[name]
	if n == nil {
		return
	}
	for _, ip := range n.ips {
		if ix.nodeIPs[ip] == n {
			delete(ix.nodeIPs, ip)
		}
	}
	n.ips, n.known = nil, false
	if n.refs <= 0 {
		delete(ix.nodes, name)
	}
}
