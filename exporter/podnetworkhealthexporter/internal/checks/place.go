// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/targetpolicy"
)

// The placement decisions, pure: the edge (resolve.go) reads what targetRead names and
// the source pod, and these functions decide from what it read.

// targetRead is what a check's target needs read: a pod or a Service (of namespace), or
// nothing (an address or a URL: endpoint is set).
type targetRead struct {
	pod, service    bool
	namespace, name string
	port            int32
	// cross: the target is another namespace's pod or Service (opted in).
	cross    bool
	endpoint string
	kind     string // the resolved target's kind: Pod, Service, Address, URL
}

// planTarget decides what resolving sp's target needs read, or refuses it without reading
// anything (another namespace's pod or Service without the opt-in: the refusal is the same
// whether it exists or not).
func planTarget(ns string, sp spec, allowCross bool) (targetRead, *placement) {
	t := sp.target
	switch {
	case t.Pod != nil, t.Service != nil:
		what, name, tns, port := "pod", "", "", int32(0)
		if t.Pod != nil {
			name, tns, port = t.Pod.Name, t.Pod.Namespace, t.Pod.Port
		} else {
			what, name, tns, port = "service", t.Service.Name, t.Service.Namespace, t.Service.Port
		}
		if tns == "" {
			tns = ns
		}
		if tns != ns && !allowCross {
			p := refuseOutsideNamespace(what)
			return targetRead{}, &p
		}
		return targetRead{pod: t.Pod != nil, service: t.Service != nil, namespace: tns, name: name, port: port, cross: tns != ns}, nil
	case t.Address != "":
		return targetRead{endpoint: t.Address, kind: "Address"}, nil
	case t.URL != "":
		return targetRead{endpoint: t.URL, kind: "URL"}, nil
	}
	p := refuse(v1alpha1.ReasonInvalidCheck, "no target")
	return targetRead{}, &p
}

// podTarget decides a pod target from its read (pod, err). Another namespace's pod gets
// one message whatever the reason, so a namespace editor learns nothing of other
// namespaces' pods from a refusal.
func podTarget(r targetRead, pod *corev1.Pod, err error, probe v1alpha1.ProbeType) (string, *placement) {
	if r.cross {
		if err != nil || pod.Status.PodIP == "" {
			p := refuse(v1alpha1.ReasonTargetNotFound, fmt.Sprintf("target pod %s/%s: not found, not readable or without an IP yet", r.namespace, r.name))
			return "", &p
		}
		return hostPort(pod.Status.PodIP, r.port, probe), nil
	}
	if err != nil {
		p := refuse(v1alpha1.ReasonTargetNotFound, fmt.Sprintf("target pod %s/%s: %v", r.namespace, r.name, shortErr(err)))
		return "", &p
	}
	if pod.Status.PodIP == "" {
		p := refuse(v1alpha1.ReasonTargetNotFound, fmt.Sprintf("target pod %s/%s has no IP yet", r.namespace, r.name))
		return "", &p
	}
	return hostPort(pod.Status.PodIP, r.port, probe), nil
}

// serviceTarget decides a Service target from its read (svc, err), alike.
func serviceTarget(r targetRead, svc *corev1.Service, err error, probe v1alpha1.ProbeType) (string, *placement) {
	hasPort := func() bool {
		return slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Port == r.port })
	}
	headless := func() bool { return svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone }
	if r.cross {
		if err != nil || headless() || !hasPort() {
			p := refuse(v1alpha1.ReasonTargetNotFound, fmt.Sprintf("target service %s/%s port %d: not found, not readable, headless or without that port", r.namespace, r.name, r.port))
			return "", &p
		}
		return hostPort(svc.Spec.ClusterIP, r.port, probe), nil
	}
	var p placement
	switch {
	case err != nil:
		p = refuse(v1alpha1.ReasonTargetNotFound, fmt.Sprintf("target service %s/%s: %v", r.namespace, r.name, shortErr(err)))
	case headless():
		p = refuse(v1alpha1.ReasonTargetNotFound, fmt.Sprintf("target service %s/%s has no ClusterIP (headless); name a pod instead", r.namespace, r.name))
	case !hasPort():
		p = refuse(v1alpha1.ReasonTargetNotFound, fmt.Sprintf("target service %s/%s has no port %d", r.namespace, r.name, r.port))
	default:
		return hostPort(svc.Spec.ClusterIP, r.port, probe), nil
	}
	return "", &p
}

// vetTarget applies the target policy to a resolved endpoint; another namespace's target
// is refused without naming its address.
func vetTarget(policy targetpolicy.Policy, endpoint string, cross bool) *placement {
	err := vet(policy, endpoint)
	if err == nil {
		return nil
	}
	p := refuse(v1alpha1.ReasonTargetRefused, fmt.Sprintf("target %s refused by the target policy, nothing is sent: %v", endpoint, err))
	if cross {
		p = refuse(v1alpha1.ReasonTargetRefused, "target refused by the target policy, nothing is sent")
	}
	return &p
}

// vet applies the target policy to an endpoint whose host is an IP literal (names are
// vetted where they are resolved, by the runner).
func vet(policy targetpolicy.Policy, endpoint string) error {
	host := endpoint
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil {
			return err
		}
		host = u.Hostname()
	} else if h, _, err := net.SplitHostPort(endpoint); err == nil {
		host = h
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return policy.Check(a)
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return policy.Check(netip.MustParseAddr("127.0.0.1"))
	}
	return nil
}

var errNoPodSelected = errors.New("no running pod matches the selector")

// pickSourcePod is the source pod among those a selector matched: the oldest running one
// (then by name), or errNoPodSelected.
func pickSourcePod(pods []corev1.Pod) (*corev1.Pod, error) {
	var best *corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || p.Spec.NodeName == "" {
			continue
		}
		if best == nil || p.CreationTimestamp.Before(&best.CreationTimestamp) ||
			(p.CreationTimestamp.Equal(&best.CreationTimestamp) && p.Name < best.Name) {
			best = p
		}
	}
	if best == nil {
		return nil, errNoPodSelected
	}
	return best, nil
}

// sourcePlacement places a check whose target resolved to endpoint (of kind) on its
// source pod's vantage point, from the source pod's read (pod, err): its sidecar when it
// has one, else its node's agent.
func sourcePlacement(ns string, sp spec, pod *corev1.Pod, err error, endpoint, kind string) placement {
	if err != nil {
		if apierrors.IsNotFound(err) || errors.Is(err, errNoPodSelected) {
			return refuse(v1alpha1.ReasonSourceNotFound, fmt.Sprintf("source pod %s", describeSource(ns, sp.sourcePod, sp.selector, err)))
		}
		return refuse(v1alpha1.ReasonSourceNotFound, fmt.Sprintf("source pod %s: %v", describeSource(ns, sp.sourcePod, sp.selector, nil), shortErr(err)))
	}
	if pod.Status.Phase != corev1.PodRunning || pod.Spec.NodeName == "" {
		return refuse(v1alpha1.ReasonSourceNotReady, fmt.Sprintf("source pod %s/%s is %s", pod.Namespace, pod.Name, pod.Status.Phase))
	}
	p := placement{accepted: true, mode: v1alpha1.VantageAgent, sourcePod: pod.Name, node: pod.Spec.NodeName, endpoint: endpoint, targetKind: kind}
	if pod.Labels[v1alpha1.LabelSidecar] == "true" {
		p.mode = v1alpha1.VantageSidecar
		p.message = "probed from the source pod by its netpulse sidecar"
	} else {
		p.message = fmt.Sprintf("probed from the netpulse agent on node %s (the source pod has no netpulse sidecar)", pod.Spec.NodeName)
	}
	return p
}

// refuseOutsideNamespace refuses a pod or Service target in another namespace without
// looking it up: the message is the same whether it exists or not.
func refuseOutsideNamespace(what string) placement {
	return refuse(v1alpha1.ReasonTargetOutsideNamespace, fmt.Sprintf(
		"the target %s is in another namespace: a check may only target pods and Services of its own namespace (the cluster admin can allow others with the gateway's checks.allow_cross_namespace_targets); nothing was looked up", what))
}

func describeSource(ns, name string, sel *metav1.LabelSelector, err error) string {
	what := ns + "/" + name
	if sel != nil {
		what = ns + " selector " + metav1.FormatLabelSelector(sel)
	}
	if err != nil {
		return what + ": " + shortErr(err)
	}
	return what
}

func refuse(reason, msg string) placement {
	return placement{reason: reason, message: v1alpha1.TruncateMessage(msg, v1alpha1.MaxMessageLength)}
}

func shortErr(err error) string {
	if apierrors.IsNotFound(err) {
		return "not found"
	}
	return err.Error()
}

// hostPort is the endpoint of a resolved pod or Service: the address (icmp) or address:port.
func hostPort(ip string, port int32, probe v1alpha1.ProbeType) string {
	if probe == v1alpha1.ProbeTypeICMP || port == 0 {
		return ip
	}
	return net.JoinHostPort(ip, strconv.Itoa(int(port)))
}
