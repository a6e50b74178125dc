// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8stokenauthextension

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// boundPods is the extension's own index of the pods that may present a token: one
// list+watch per allowed service account (namespace, field selector
// spec.serviceAccountName), reduced to name, UID, node and deletion time before caching.
// Local verification accepts a token only while the pod it is bound to is here with the
// token's UID, so a deleted pod's token stops being accepted as soon as the watch sees the
// deletion. Its own, not the k8s_net_attributes processor's k8sindex: a component never
// reaches into another's, that index is keyed by the processor's configuration and keeps
// only pods that own an IP (no host-network or pending pods), and this one holds only the
// allowed accounts' pods (65,000 agents: a few MB).
type boundPods struct {
	accounts map[string]*accountPods // by "namespace/name"

	mu     sync.Mutex
	cancel context.CancelFunc
	wg     sync.WaitGroup
	hc     *http.Client
}

// accountPods are the pods of one service account, by UID, and the UIDs of those the watch
// saw deleted (or gone at a relist): a UID is never reused, so a token bound to one of them
// is refused without asking the API. Bounded (maxGone, least recently deleted forgotten
// first); a UID not remembered goes to TokenReview, which refuses it too.
type accountPods struct {
	mu     sync.RWMutex
	pods   map[string]boundPod
	gone   *lru.Cache[string, struct{}]
	synced chan struct{}
	once   sync.Once
}

// maxGone bounds the deleted pods' UIDs remembered per account (~100 B each).
const maxGone = 16_384

// boundPod is what local verification checks a token's pod claims against.
type boundPod struct {
	name, node string
	// deleted: metadata.deletionTimestamp (zero when not being deleted).
	deleted time.Time
}

func newBoundPods(serviceAccounts []string) *boundPods {
	b := &boundPods{accounts: map[string]*accountPods{}}
	for _, sa := range serviceAccounts {
		gone, _ := lru.New[string, struct{}](maxGone)
		b.accounts[sa] = &accountPods{pods: map[string]boundPod{}, gone: gone, synced: make(chan struct{})}
	}
	return b
}

// lookup returns the pod with uid of namespace/serviceAccount, or whether the watch saw it
// deleted: synced is false while the account's initial list has not arrived (nothing can
// be concluded then).
func (b *boundPods) lookup(namespace, serviceAccount, uid string) (p boundPod, found, deleted, synced bool) {
	ap := b.accounts[namespace+"/"+serviceAccount]
	if ap == nil {
		return boundPod{}, false, false, false
	}
	if !isClosed(ap.synced) {
		return boundPod{}, false, false, false
	}
	ap.mu.RLock()
	p, found = ap.pods[uid]
	ap.mu.RUnlock()
	if !found {
		deleted = ap.gone.Contains(uid)
	}
	return p, found, deleted, true
}

// len is the number of pods held.
func (b *boundPods) len() int {
	n := 0
	for _, ap := range b.accounts {
		ap.mu.RLock()
		n += len(ap.pods)
		ap.mu.RUnlock()
	}
	return n
}

// start runs one reflector per account with cfg (a private transport, so stop closes its
// connections) and returns at once.
func (b *boundPods) start(cfg *rest.Config, logger *zap.Logger) error {
	c := rest.CopyConfig(cfg)
	if c.Dial == nil {
		c.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfigAndClient(c, hc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.mu.Lock()
	b.cancel, b.hc = cancel, hc
	b.mu.Unlock()
	for sa, ap := range b.accounts {
		ns, name, _ := strings.Cut(sa, "/")
		r := cache.NewReflectorWithOptions(accountListWatch(cs, ns, name), &corev1.Pod{}, &accountStore{ap: ap},
			cache.ReflectorOptions{Name: "netpulse/k8s_token_auth pods of " + sa, ResyncPeriod: 0})
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			r.RunWithContext(ctx)
		}()
	}
	logger.Info("k8s_token_auth: watching the pods of the allowed service accounts (local verification checks the bound pod)",
		zap.Int("service_accounts", len(b.accounts)))
	return nil
}

// stop ends the reflectors; safe without start and twice.
func (b *boundPods) stop() {
	b.mu.Lock()
	cancel, hc := b.cancel, b.hc
	b.cancel, b.hc = nil, nil
	b.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	b.wg.Wait()
	hc.CloseIdleConnections()
}

func accountListWatch(cs kubernetes.Interface, ns, serviceAccount string) *cache.ListWatch {
	sel := fields.OneTermEqualSelector("spec.serviceAccountName", serviceAccount).String()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return cs.CoreV1().Pods(ns).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return cs.CoreV1().Pods(ns).Watch(ctx, o)
		},
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// podRef is a pod reduced to what boundPods keeps.
type podRef struct {
	uid string
	boundPod
}

func refOf(obj any) *podRef {
	switch o := obj.(type) {
	case *podRef:
		return o
	case *corev1.Pod:
		r := &podRef{uid: string(o.UID), boundPod: boundPod{name: o.Name, node: o.Spec.NodeName}}
		if o.DeletionTimestamp != nil {
			r.deleted = o.DeletionTimestamp.Time
		}
		return r
	case cache.DeletedFinalStateUnknown:
		return refOf(o.Obj)
	}
	return nil
}

// accountStore is a reflector's store: pods become podRefs at once (TransformingStore, so a
// watch-list initial sync keeps no Pod either).
type accountStore struct{ ap *accountPods }

var _ cache.TransformingStore = (*accountStore)(nil)

func (s *accountStore) Transformer() cache.TransformFunc {
	return func(obj any) (any, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			return refOf(p), nil
		}
		return obj, nil
	}
}

func (s *accountStore) Add(obj any) error { return s.Update(obj) }

func (s *accountStore) Update(obj any) error {
	if r := refOf(obj); r != nil {
		s.ap.mu.Lock()
		s.ap.pods[r.uid] = r.boundPod
		s.ap.mu.Unlock()
	}
	return nil
}

func (s *accountStore) Delete(obj any) error {
	if r := refOf(obj); r != nil {
		s.ap.mu.Lock()
		delete(s.ap.pods, r.uid)
		s.ap.mu.Unlock()
		s.ap.gone.Add(r.uid, struct{}{})
	}
	return nil
}

func (s *accountStore) Replace(list []any, _ string) error {
	pods := make(map[string]boundPod, len(list))
	for _, obj := range list {
		if r := refOf(obj); r != nil {
			pods[r.uid] = r.boundPod
		}
	}
	s.ap.mu.Lock()
	old := s.ap.pods
	s.ap.pods = pods
	s.ap.mu.Unlock()
	// Pods missing from a relist were deleted meanwhile.
	for uid := range old {
		if _, ok := pods[uid]; !ok {
			s.ap.gone.Add(uid, struct{}{})
		}
	}
	s.ap.once.Do(func() { close(s.ap.synced) })
	return nil
}

func (s *accountStore) Resync() error { return nil }
