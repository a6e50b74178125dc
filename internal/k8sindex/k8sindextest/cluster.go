// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package k8sindextest builds synthetic but realistic clusters (Nodes and Pods with
// owners, labels, dual-stack and host-network pods) for the k8sindex and
// k8s_net_attributes tests and benchmarks: as API objects in memory, or loaded into a
// real API server (testbed/kubetest) with a fast concurrent loader.
package k8sindextest

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Spec sizes a synthetic cluster.
type Spec struct {
	Nodes      int // default 10
	Pods       int // default 100
	Namespaces int // default 10
	// DualStackEvery makes every n-th pod dual-stack (0: none).
	DualStackEvery int
	// HostNetworkEvery makes every n-th pod a host-network pod (0: none).
	HostNetworkEvery int
	// Zones is the number of zones nodes are spread over (default 3).
	Zones int
}

func (s *Spec) defaults() {
	if s.Nodes <= 0 {
		s.Nodes = 10
	}
	if s.Pods <= 0 {
		s.Pods = 100
	}
	if s.Namespaces <= 0 {
		s.Namespaces = 10
	}
	if s.Zones <= 0 {
		s.Zones = 3
	}
}

// Cluster is a generated set of objects.
type Cluster struct {
	Spec       Spec
	Namespaces []string
	Nodes      []*corev1.Node
	Pods       []*corev1.Pod
}

// NodeName is the name of node i.
func NodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

// NodeInternalIP is node i's InternalIP (172.16.0.0/12).
func NodeInternalIP(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{172, byte(16 + i>>16&0x0f), byte(i >> 8), byte(i)})
}

// PodIPv4 is the IPv4 address of the n-th pod on node i (10.64.0.0/10, a /24 per node).
func PodIPv4(node, n int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(64 + node>>8&0x3f), byte(node), byte(2 + n)})
}

// PodIPv6 is the IPv6 address of the n-th pod on node i (fd00:10::/32).
func PodIPv6(node, n int) netip.Addr {
	return netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 0, 0, byte(node >> 8), byte(node), 14: byte(n >> 8), 15: byte(2 + n)})
}

// Generate builds the objects of a cluster; pods carry their status (IPs, phase,
// readiness) already. Generation is deterministic.
func Generate(spec Spec) *Cluster {
	spec.defaults()
	c := &Cluster{Spec: spec, Namespaces: namespaces(spec)}
	c.Nodes = slices.Collect(NodesOf(spec))
	c.Pods = slices.Collect(PodsOf(spec))
	return c
}

func namespaces(spec Spec) []string {
	out := make([]string, spec.Namespaces)
	for i := range out {
		out[i] = fmt.Sprintf("team-%03d", i)
	}
	return out
}

// NodesOf yields the nodes of Generate(spec) one at a time, without keeping them.
func NodesOf(spec Spec) iter.Seq[*corev1.Node] {
	spec.defaults()
	return func(yield func(*corev1.Node) bool) {
		for i := 0; i < spec.Nodes; i++ {
			if !yield(makeNode(i, spec.Zones)) {
				return
			}
		}
	}
}

// PodsOf yields the pods of Generate(spec) one at a time, without keeping them (for
// memory measurements at sizes not worth loading into an API server).
func PodsOf(spec Spec) iter.Seq[*corev1.Pod] {
	spec.defaults()
	c := &Cluster{Spec: spec, Namespaces: namespaces(spec)}
	return func(yield func(*corev1.Pod) bool) {
		for i := 0; i < spec.Pods; i++ {
			// Pods are spread round-robin, so pod i is the (i/Nodes)-th on its node.
			if !yield(makePod(c, i, i%spec.Nodes, i/spec.Nodes)) {
				return
			}
		}
	}
}

func makeNode(i, zones int) *corev1.Node {
	zone := fmt.Sprintf("eu-west-1%c", 'a'+byte(i%zones))
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: NodeName(i),
			UID:  types.UID(fmt.Sprintf("6a0c3b9e-0000-4000-8000-%012d", i)),
			Labels: map[string]string{
				"kubernetes.io/hostname":           NodeName(i),
				"kubernetes.io/os":                 "linux",
				"kubernetes.io/arch":               "amd64",
				"node.kubernetes.io/instance-type": "m6i.2xlarge",
				corev1.LabelTopologyZone:           zone,
				corev1.LabelTopologyRegion:         "eu-west-1",
			},
		},
		Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.%d.%d.0/24", 64+i>>8&0x3f, i&0xff)},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: NodeInternalIP(i).String()},
				{Type: corev1.NodeHostName, Address: NodeName(i)},
			},
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("8"),
				corev1.ResourceMemory: resource.MustParse("32Gi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}},
		},
	}
	if i%10 == 0 {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP,
			Address: netip.AddrFrom4([4]byte{203, 0, 113, byte(i / 10)}).String()})
	}
	return n
}

// workload shapes, by pod index: mostly Deployments, then StatefulSets, DaemonSet-like,
// Jobs from CronJobs, plain Jobs and bare pods.
func makePod(c *Cluster, i, node, n int) *corev1.Pod {
	spec := c.Spec
	// A workload (three consecutive pods) lives in one namespace.
	ns := c.Namespaces[(i/3)%len(c.Namespaces)]
	app := fmt.Sprintf("svc-%04d", (i/3)%2000)
	var (
		name   string
		labels = map[string]string{"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "shop", "team": ns}
		owner  *metav1.OwnerReference
	)
	yes := true
	mkOwner := func(apiVersion, kind, name string) *metav1.OwnerReference {
		return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, Controller: &yes, BlockOwnerDeletion: &yes,
			UID: types.UID(fmt.Sprintf("0b1d3a5c-%04x-4000-8000-%012d", len(kind), i/3))}
	}
	switch m := i % 20; {
	case m < 14: // Deployment -> ReplicaSet
		hash := podTemplateHash(i / 3)
		rs := app + "-" + hash
		name = rs + "-" + randSuffix(i)
		labels["pod-template-hash"] = hash
		owner = mkOwner("apps/v1", "ReplicaSet", rs)
	case m < 16: // StatefulSet
		name = fmt.Sprintf("%s-db-%d", app, i)
		owner = mkOwner("apps/v1", "StatefulSet", app+"-db")
		labels["apps.kubernetes.io/pod-index"] = strconv.Itoa(i % 3)
	case m < 18: // DaemonSet
		name = "netpulse-agent-" + randSuffix(i)
		owner = mkOwner("apps/v1", "DaemonSet", "netpulse-agent")
	case m < 19: // Job from a CronJob
		job := fmt.Sprintf("%s-report-%d", app, 29000000+i%7)
		name = job + "-" + randSuffix(i)
		owner = mkOwner("batch/v1", "Job", job)
		labels["batch.kubernetes.io/job-name"] = job
	default: // bare pod
		name = fmt.Sprintf("debug-%s", randSuffix(i))
	}
	ips := []corev1.PodIP{{IP: PodIPv4(node, n).String()}}
	hostNetwork := spec.HostNetworkEvery > 0 && i%spec.HostNetworkEvery == spec.HostNetworkEvery-1
	if hostNetwork {
		ips = []corev1.PodIP{{IP: NodeInternalIP(node).String()}}
	} else if spec.DualStackEvery > 0 && i%spec.DualStackEvery == 0 {
		ips = append(ips, corev1.PodIP{IP: PodIPv6(node, n).String()})
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         ns,
			UID:               types.UID(fmt.Sprintf("5f3e9a2c-%04x-4%03x-8000-%012d", i>>12&0xffff, i&0xfff, i)),
			Labels:            labels,
			Annotations:       map[string]string{"kubectl.kubernetes.io/default-container": "app"},
			CreationTimestamp: metav1.Unix(1_700_000_000+int64(i), 0),
		},
		Spec: corev1.PodSpec{
			NodeName:                     NodeName(node),
			HostNetwork:                  hostNetwork,
			AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "registry.example.com/shop/" + app + ":1.4.2",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Env:   []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
				},
			}},
		},
		Status: corev1.PodStatus{
			Phase:  corev1.PodRunning,
			HostIP: NodeInternalIP(node).String(),
			PodIP:  ips[0].IP,
			PodIPs: ips,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
			},
		},
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return p
}

func podTemplateHash(i int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 10)
	x := uint64(i)*2654435761 + 12345
	for k := range b {
		b[k] = alphabet[x%uint64(len(alphabet))]
		x = x/uint64(len(alphabet)) + uint64(k)*7919
	}
	return string(b)
}

func randSuffix(i int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	// A bijection of i (7 is coprime to 27^5), so names never collide.
	b := make([]byte, 5)
	x := (uint64(i)*7 + 3) % (27 * 27 * 27 * 27 * 27)
	for k := range b {
		b[k] = alphabet[x%uint64(len(alphabet))]
		x /= uint64(len(alphabet))
	}
	return string(b)
}

// PodIPs returns the primary IP of every non-host-network pod.
func (c *Cluster) PodIPs() []netip.Addr {
	var out []netip.Addr
	for _, p := range c.Pods {
		if !p.Spec.HostNetwork {
			out = append(out, netip.MustParseAddr(p.Status.PodIP))
		}
	}
	return out
}

// LoadOptions tune Load.
type LoadOptions struct {
	// Workers is the number of concurrent writers (default 32).
	Workers int
	// Progress, when set, is called every 1,000 objects.
	Progress func(done, total int)
}

// Load creates the cluster's namespaces (with a default service account, so pods are
// admitted without kube-controller-manager), Nodes and Pods through the API server with
// an admin config, and sets node addresses and pod IPs through UpdateStatus as a kubelet
// would. It creates its own client with client-side rate limiting off.
func (c *Cluster) Load(ctx context.Context, admin *rest.Config, opts LoadOptions) error {
	if opts.Workers <= 0 {
		opts.Workers = 32
	}
	cfg := rest.CopyConfig(admin)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling for the loader
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, ns := range c.Namespaces {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create service account %s/default: %w", ns, err)
		}
	}
	total := len(c.Nodes) + len(c.Pods)
	var done atomic.Int64
	tick := func() {
		if d := done.Add(1); opts.Progress != nil && d%1000 == 0 {
			opts.Progress(int(d), total)
		}
	}
	run := func(n int, fn func(i int) error) error {
		var (
			next atomic.Int64
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		next.Store(-1)
		for w := 0; w < opts.Workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1))
					if i >= n || ctx.Err() != nil {
						return
					}
					if err := fn(i); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						return
					}
					tick()
				}
			}()
		}
		wg.Wait()
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		return ctx.Err()
	}
	if err := run(len(c.Nodes), func(i int) error {
		want := c.Nodes[i]
		obj := want.DeepCopy()
		obj.UID, obj.Status = "", corev1.NodeStatus{}
		got, err := cs.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create node %s: %w", want.Name, err)
		}
		got.Status = want.Status
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update node status %s: %w", want.Name, err)
		}
		return nil
	}); err != nil {
		return err
	}
	return run(len(c.Pods), func(i int) error {
		_, err := CreatePod(ctx, cs, c.Pods[i])
		return err
	})
}

// CreatePod creates pod (without UID, owner UIDs are kept) and sets its status the way a
// kubelet would. It returns the stored object.
func CreatePod(ctx context.Context, cs kubernetes.Interface, want *corev1.Pod) (*corev1.Pod, error) {
	obj := want.DeepCopy()
	obj.UID, obj.CreationTimestamp, obj.Status = "", metav1.Time{}, corev1.PodStatus{}
	got, err := cs.CoreV1().Pods(want.Namespace).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s/%s: %w", want.Namespace, want.Name, err)
	}
	got.Status = want.Status
	got, err = cs.CoreV1().Pods(want.Namespace).UpdateStatus(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update pod status %s/%s: %w", want.Namespace, want.Name, err)
	}
	return got, nil
}
