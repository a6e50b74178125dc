// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package simcluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netpulse/netpulse/testbed/kubetest"
)

// svcTable is the harness's kube-proxy table inside every pod namespace (node namespaces,
// which double as the agent pods', and workload namespaces); separate from the fault table
// (nftTable), so faults and Services never overwrite each other.
const svcTable = "netpulse_svc"

// EndpointSliceManager is the endpointslice.kubernetes.io/managed-by value of the
// EndpointSlices the harness writes for its Services (no endpointslice controller runs).
const EndpointSliceManager = "simcluster.netpulse.io"

// serviceProxy plays kube-proxy (and the endpointslice controller) for the Services of
// CreateService. IPv4 only: the API server allocates ClusterIPs from ServiceCIDR.
type serviceProxy struct {
	// mu serialises resyncs and guards what follows.
	mu       sync.Mutex
	services map[string]*simService // by namespace/name
	// ruleset is the table for the current endpoints ("" before the first Service);
	// applied is what each namespace has.
	ruleset string
	applied map[string]string
	failing bool

	loopClosed bool // Stop ended the loop: no new one
	loopStop   chan struct{}
	loopDone   chan struct{}
}

type simService struct {
	svc       *corev1.Service
	endpoints []serviceEndpoint // sorted: the first ready one gets the traffic
	slice     string            // what the EndpointSlice last written says
}

type serviceEndpoint struct {
	pod         string
	uid         types.UID
	node        string
	ip          netip.Addr
	ready       bool
	terminating bool
}

// CreateService creates a ClusterIP Service (TCP port -> targetPort, selecting pods by
// selector) through the API, which allocates its ClusterIP from ServiceCIDR, and makes it
// reachable as kube-proxy would: in every pod namespace (nodes/agent pods and workloads,
// present and future) nft DNATs <clusterIP>:<port>/tcp to <podIP>:<targetPort> of the
// first ready endpoint (the oldest ready pod matching the selector, workloads and agents
// alike); with no ready endpoint connections are refused (TCP reset). The harness also
// writes the Service's EndpointSlice. Endpoints follow pod changes within a second; call
// ResyncServices to apply them at once. targetPort 0 means port. IPv4 only.
func (c *Cluster) CreateService(ctx context.Context, namespace, name string, port, targetPort int32, selector map[string]string) (*corev1.Service, error) {
	if targetPort == 0 {
		targetPort = port
	}
	if namespace == "" {
		namespace = "default"
	}
	if err := kubetest.EnsureNamespace(ctx, c.Client, namespace); err != nil {
		return nil, fmt.Errorf("simcluster: %w", err)
	}
	created, err := c.Client.CoreV1().Services(namespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: maps.Clone(selector),
			Ports: []corev1.ServicePort{{
				Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(targetPort),
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("simcluster: create Service %s/%s: %w", namespace, name, err)
	}
	if ip, err := netip.ParseAddr(created.Spec.ClusterIP); err != nil || !ServiceCIDR.Contains(ip) {
		return created, fmt.Errorf("simcluster: Service %s/%s got ClusterIP %q, not in %s", namespace, name, created.Spec.ClusterIP, ServiceCIDR)
	}
	c.svc.mu.Lock()
	if c.svc.services == nil {
		c.svc.services = map[string]*simService{}
	}
	c.svc.services[namespace+"/"+name] = &simService{svc: created}
	if c.svc.loopStop == nil && !c.svc.loopClosed {
		c.svc.loopStop, c.svc.loopDone = make(chan struct{}), make(chan struct{})
		go c.serviceLoop(c.svc.loopStop, c.svc.loopDone)
	}
	c.svc.mu.Unlock()
	c.logf("simcluster: Service %s/%s %s:%d -> :%d selecting %v", namespace, name, created.Spec.ClusterIP, port, targetPort, selector)
	if err := c.resyncServices(ctx); err != nil {
		return created, err
	}
	return created, nil
}

// DeleteService deletes a Service of CreateService and its rules.
func (c *Cluster) DeleteService(ctx context.Context, namespace, name string) error {
	err := c.Client.CoreV1().Services(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("simcluster: delete Service %s/%s: %w", namespace, name, err)
	}
	c.svc.mu.Lock()
	delete(c.svc.services, namespace+"/"+name)
	c.svc.mu.Unlock()
	return c.resyncServices(ctx)
}

// ServiceEndpoint is where connections to the Service's ClusterIP go now (podIP:targetPort
// of its first ready endpoint); false when it has none or is not a Service of
// CreateService.
func (c *Cluster) ServiceEndpoint(namespace, name string) (netip.AddrPort, bool) {
	c.svc.mu.Lock()
	defer c.svc.mu.Unlock()
	s, ok := c.svc.services[namespace+"/"+name]
	if !ok {
		return netip.AddrPort{}, false
	}
	for _, ep := range s.endpoints {
		if ep.ready {
			return netip.AddrPortFrom(ep.ip, uint16(s.svc.Spec.Ports[0].TargetPort.IntValue())), true
		}
	}
	return netip.AddrPort{}, false
}

// ResyncServices recomputes every Service's endpoints from the pods in the API (as the
// endpointslice controller would), writes the EndpointSlices and applies the rules to
// every pod namespace now, instead of within the second the background resync takes.
// When the API server cannot be reached the previous endpoints stay in force.
func (c *Cluster) ResyncServices() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.resyncServices(ctx)
}

func (c *Cluster) resyncServices(ctx context.Context) error {
	c.svc.mu.Lock()
	defer c.svc.mu.Unlock()
	if c.svc.services == nil {
		return nil // no Service ever: nothing to do
	}
	var errs []error
	keys := slices.Sorted(maps.Keys(c.svc.services))
	for _, k := range keys {
		s := c.svc.services[k]
		eps, err := c.serviceEndpoints(ctx, s.svc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if before, after := firstReady(s.endpoints), firstReady(eps); before != after {
			c.logf("simcluster: Service %s %s:%d -> %s", k, s.svc.Spec.ClusterIP, s.svc.Spec.Ports[0].Port, describeEndpoint(after, s.svc))
		}
		s.endpoints = eps
		if err := c.syncEndpointSlice(ctx, s); err != nil {
			errs = append(errs, err)
		}
	}
	svcs := make([]*simService, 0, len(keys))
	for _, k := range keys {
		svcs = append(svcs, c.svc.services[k])
	}
	c.svc.ruleset = serviceRuleset(svcs)
	errs = append(errs, c.applyServiceRulesLocked())
	return errors.Join(errs...)
}

func firstReady(eps []serviceEndpoint) netip.Addr {
	for _, ep := range eps {
		if ep.ready {
			return ep.ip
		}
	}
	return netip.Addr{}
}

func describeEndpoint(ip netip.Addr, svc *corev1.Service) string {
	if !ip.IsValid() {
		return "no ready endpoint (refused)"
	}
	return fmt.Sprintf("%s:%d", ip, svc.Spec.Ports[0].TargetPort.IntValue())
}

// serviceEndpoints lists the pods the Service selects that have a simulated pod IP,
// oldest first.
func (c *Cluster) serviceEndpoints(ctx context.Context, svc *corev1.Service) ([]serviceEndpoint, error) {
	if len(svc.Spec.Selector) == 0 {
		return nil, nil // no selector: nobody manages its endpoints
	}
	list, err := c.Client.CoreV1().Pods(svc.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("simcluster: endpoints of Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	pods := list.Items
	slices.SortFunc(pods, func(a, b corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	var eps []serviceEndpoint
	for _, p := range pods {
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil || !Prefix4.Contains(ip) || p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
			continue
		}
		ready := false
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady {
				ready = cond.Status == corev1.ConditionTrue
			}
		}
		terminating := p.DeletionTimestamp != nil
		eps = append(eps, serviceEndpoint{
			pod: p.Name, uid: p.UID, node: p.Spec.NodeName, ip: ip,
			ready: ready && !terminating, terminating: terminating,
		})
	}
	return eps, nil
}

// syncEndpointSlice writes the Service's EndpointSlice (one, IPv4) when its endpoints
// changed, as the endpointslice controller would.
func (c *Cluster) syncEndpointSlice(ctx context.Context, s *simService) error {
	svc := s.svc
	port := svc.Spec.Ports[0]
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      svc.Name + "-simcluster",
			Namespace: svc.Namespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: svc.Name,
				discoveryv1.LabelManagedBy:   EndpointSliceManager,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
				Controller: ptr(true), BlockOwnerDeletion: ptr(true),
			}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{
			Name: ptr(port.Name), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(port.TargetPort.IntValue())),
		}},
		Endpoints: []discoveryv1.Endpoint{},
	}
	for _, ep := range s.endpoints {
		want.Endpoints = append(want.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{ep.ip.String()},
			Conditions: discoveryv1.EndpointConditions{
				Ready: ptr(ep.ready), Serving: ptr(!ep.terminating || ep.ready), Terminating: ptr(ep.terminating),
			},
			NodeName:  ptr(ep.node),
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: svc.Namespace, Name: ep.pod, UID: ep.uid},
		})
	}
	fingerprint := fmt.Sprint(s.endpoints)
	if fingerprint == s.slice {
		return nil
	}
	api := c.Client.DiscoveryV1().EndpointSlices(svc.Namespace)
	cur, err := api.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(ctx, want, metav1.CreateOptions{})
	case err == nil:
		want.ResourceVersion = cur.ResourceVersion
		_, err = api.Update(ctx, want, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("simcluster: EndpointSlice %s/%s: %w", want.Namespace, want.Name, err)
	}
	s.slice = fingerprint
	return nil
}

// serviceRuleset renders the kube-proxy table for svcs: DNAT in a nat output chain (the
// namespaces' own connections; nothing is forwarded), TCP resets for Services without a
// ready endpoint. With no Service it only removes the table.
func serviceRuleset(svcs []*simService) string {
	var b strings.Builder
	// Create-then-delete: the delete succeeds whether or not the table exists, and the
	// whole file is one transaction.
	fmt.Fprintf(&b, "table ip %s\ndelete table ip %s\n", svcTable, svcTable)
	if len(svcs) == 0 {
		return b.String()
	}
	var dnat, reject strings.Builder
	for _, s := range svcs {
		ip, err := netip.ParseAddr(s.svc.Spec.ClusterIP)
		if err != nil || !ip.Is4() {
			continue // headless, or not IPv4
		}
		for _, p := range s.svc.Spec.Ports {
			if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
				continue
			}
			target := p.TargetPort.IntValue()
			if target == 0 {
				target = int(p.Port)
			}
			comment := fmt.Sprintf("%q", s.svc.Namespace+"/"+s.svc.Name)
			if ep := firstReady(s.endpoints); ep.IsValid() {
				fmt.Fprintf(&dnat, "\t\tip daddr %s tcp dport %d counter dnat to %s:%d comment %s\n", ip, p.Port, ep, target, comment)
			} else {
				fmt.Fprintf(&reject, "\t\tip daddr %s tcp dport %d counter reject with tcp reset comment %s\n", ip, p.Port, comment)
			}
		}
	}
	fmt.Fprintf(&b, "table ip %s {\n", svcTable)
	// priority -100 is dstnat (nft 1.0.6 takes the keyword for prerouting only).
	b.WriteString("\tchain output {\n\t\ttype nat hook output priority -100; policy accept;\n")
	b.WriteString(dnat.String())
	b.WriteString("\t}\n")
	b.WriteString("\tchain no_endpoints {\n\t\ttype filter hook output priority filter; policy accept;\n")
	b.WriteString(reject.String())
	b.WriteString("\t}\n}\n")
	return b.String()
}

// podNetnses lists the namespaces that get the Service rules: every node's and every
// workload's that exists.
func (c *Cluster) podNetnses() []string {
	out := make([]string, 0, len(c.nodes)+MaxWorkloads)
	for _, n := range c.nodes {
		out = append(out, n.Netns)
	}
	c.wlMu.Lock()
	defer c.wlMu.Unlock()
	for _, w := range c.workloads {
		if w != nil && w.netnsUp {
			out = append(out, w.Netns)
		}
	}
	return out
}

// applyServiceRules brings every pod namespace up to the current rules (a new workload
// namespace, for one).
func (c *Cluster) applyServiceRules() error {
	c.svc.mu.Lock()
	defer c.svc.mu.Unlock()
	return c.applyServiceRulesLocked()
}

func (c *Cluster) applyServiceRulesLocked() error {
	if c.svc.ruleset == "" {
		return nil
	}
	if c.svc.applied == nil {
		c.svc.applied = map[string]string{}
	}
	var errs []error
	for _, ns := range c.podNetnses() {
		if c.svc.applied[ns] == c.svc.ruleset {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := run(ctx, []byte(c.svc.ruleset), "ip", "netns", "exec", ns, "nft", "-f", "-")
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("simcluster: Service rules in %s: %w", ns, err))
			continue
		}
		c.svc.applied[ns] = c.svc.ruleset
	}
	return errors.Join(errs...)
}

// forgetServiceNetns is called before a workload namespace is deleted: once it returns no
// resync touches the namespace any more (podNetnses no longer lists it).
func (c *Cluster) forgetServiceNetns(netns string) {
	c.svc.mu.Lock()
	delete(c.svc.applied, netns)
	c.svc.mu.Unlock()
}

// serviceLoop resyncs the Services every second, like kube-proxy and the endpointslice
// controller watching pods: agent pods coming and going, workloads stopped, readiness.
func (c *Cluster) serviceLoop(stop, done chan struct{}) {
	defer close(done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.resyncServices(ctx)
		cancel()
		c.svc.mu.Lock()
		was := c.svc.failing
		c.svc.failing = err != nil
		c.svc.mu.Unlock()
		switch {
		case err != nil && !was:
			c.logf("simcluster: Service resync failing (the previous rules stay): %v", err)
		case err == nil && was:
			c.logf("simcluster: Service resync works again")
		}
	}
}

// stopServiceLoop ends serviceLoop (Stop).
func (c *Cluster) stopServiceLoop() {
	c.svc.mu.Lock()
	stop, done := c.svc.loopStop, c.svc.loopDone
	c.svc.loopStop, c.svc.loopClosed = nil, true
	c.svc.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}
