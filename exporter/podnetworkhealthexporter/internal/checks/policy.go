// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	ocv1alpha1 "github.com/netpulse/netpulse/api/openshift/operatorcontrolplane/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/checkstatus"
	"github.com/netpulse/netpulse/internal/netpolicy"
)

// The NetworkPolicy explanation of a failing check, pure: the path its probes take, and
// the Reachable condition that names the policies denying it. The edge (explain.go) reads
// the path's pods and evaluates the path against the gateway's policy index.

// deniedPrefix starts every denial message (netpolicy.Decision.Message).
const deniedPrefix = "denied by NetworkPolic"

// policyState is what the gateway knows of the NetworkPolicies on a check's path.
type policyState struct {
	// denial is the evaluator's message when the path is denied, "" otherwise (allowed,
	// unknown, not evaluable).
	denial string
	// known: denial was evaluated for the current path.
	known bool
	// generation: the policy index's generation denial was evaluated at.
	generation uint64
	// paths: the path as last read (valid), one per endpoint of a Service target, or why
	// it cannot be evaluated (why).
	paths    []netpolicy.Path
	valid    bool
	why      string
	readAt   time.Time
	readFor  string // the vantage pod the path was read for (namespace/name)
	pathRead bool
}

// explainReachable sets a failing check's Reachable reason and message from its newest
// failure and its policy denial: reason NetworkPolicyDenied (a NetworkCheck's; a
// PodNetworkConnectivityCheck keeps OpenShift's reasons) and a message naming the policies
// when the path is denied, the failure's own otherwise. prev is the condition before the
// newest result: until this replica has evaluated the path (after a takeover), a denial
// the previous writer recorded is kept rather than flipped away and back. A succeeding
// check is never said to be denied: the network may not enforce the policy.
func explainReachable(cs *checkState, prev checkstatus.Condition) {
	r := &cs.st.Reachable
	if r.Status != checkstatus.ConditionFalse || len(cs.st.Failures) == 0 || !cs.st.Failures[0].Time.Equal(cs.st.LastResultTime) {
		return
	}
	f := cs.st.Failures[0]
	flavour := checkstatus.FlavourNetpulse
	if cs.key.kind == ocv1alpha1.Kind {
		flavour = checkstatus.FlavourOpenShift
	}
	reason, msg := checkstatus.ConditionReason(flavour, f), f.Message
	switch {
	case cs.policy.known && cs.policy.denial != "":
		msg = checkstatus.Truncate(cs.policy.denial+"; the probe: "+f.Message, checkstatus.MaxMessageLength)
		if flavour == checkstatus.FlavourNetpulse {
			reason = checkstatus.ReasonNetworkPolicyDenied
		}
	case !cs.policy.known && prev.Status == checkstatus.ConditionFalse && strings.HasPrefix(prev.Message, deniedPrefix):
		reason, msg = prev.Reason, prev.Message
	}
	r.Reason, r.Message = reason, msg
}

// vantagePod is the pod a check's probes leave from (namespace/name): the source pod with
// a sidecar, the agent that reported its results otherwise; "" when not known yet.
func vantagePod(cs *checkState) string {
	if cs.place.mode == v1alpha1.VantageSidecar {
		return cs.key.namespace + "/" + cs.place.sourcePod
	}
	return cs.observerPod
}

// policyPodOf is what the evaluator needs of a pod.
func policyPodOf(p *corev1.Pod) *netpolicy.Pod {
	out := &netpolicy.Pod{Namespace: p.Namespace, Labels: p.Labels, HostNetwork: p.Spec.HostNetwork, KnownPorts: true}
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			out.IPs = append(out.IPs, a)
		}
	}
	if len(out.IPs) == 0 {
		if a, err := netip.ParseAddr(p.Status.PodIP); err == nil {
			out.IPs = append(out.IPs, a)
		}
	}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, cp := range c.Ports {
				if cp.Name == "" {
					continue
				}
				proto := netpolicy.TCP
				if cp.Protocol != "" {
					proto = netpolicy.Protocol(cp.Protocol)
				}
				out.Ports = append(out.Ports, netpolicy.ContainerPort{Name: cp.Name, Number: cp.ContainerPort, Protocol: proto})
			}
		}
	}
	return out
}

// policyPath is the path a placed check's probes take, from the vantage pod to the
// target (the target pod when the check names one, else the resolved address, whose
// owner is not looked up), or why it is not evaluated.
func policyPath(place placement, probe v1alpha1.ProbeType, vantage, target *corev1.Pod) (netpolicy.Path, string) {
	if place.targetKind == "Service" {
		return netpolicy.Path{}, "a Service target: see policyServicePaths"
	}
	host, port, scheme := place.endpoint, int32(0), ""
	if strings.Contains(host, "://") {
		u, err := url.Parse(host)
		if err != nil {
			return netpolicy.Path{}, "the target URL does not parse"
		}
		host, scheme = u.Hostname(), u.Scheme
		if p := u.Port(); p != "" {
			n, _ := strconv.Atoi(p)
			port = int32(n)
		} else if scheme == "https" {
			port = 443
		} else {
			port = 80
		}
	} else if h, p, err := net.SplitHostPort(host); err == nil {
		n, _ := strconv.Atoi(p)
		host, port = h, int32(n)
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return netpolicy.Path{}, "the target is a name: its address is resolved where the probe runs"
	}
	path := netpolicy.Path{Source: netpolicy.End{Pod: policyPodOf(vantage)}, Destination: netpolicy.End{IP: ip.Unmap()},
		Port: port, Protocol: netpolicy.TCP}
	if probe == v1alpha1.ProbeTypeICMP {
		path.Port, path.Protocol = 0, netpolicy.None
	}
	if target != nil {
		path.Destination.Pod = policyPodOf(target)
	}
	return path, ""
}

// maxServiceEndpoints bounds the endpoints of a Service target read and evaluated.
const maxServiceEndpoints = 50

// policyServicePaths are the paths a probe of a Service's ClusterIP and port may take: to
// each of its endpoints (the Running pods its selector selects), on the target port,
// which kube-proxy rewrites the destination to before the packet reaches the endpoint's
// node. The policies are evaluated on those rewritten paths (for the egress side the API
// leaves open whether an implementation sees the Service address or the endpoint; the
// engines in use see the endpoint). The probe takes one of them, so the check is denied
// only when every one is (netpolicy.All).
func policyServicePaths(probe v1alpha1.ProbeType, port int32, svc *corev1.Service, vantage *corev1.Pod, backends []corev1.Pod) ([]netpolicy.Path, string) {
	if probe == v1alpha1.ProbeTypeICMP {
		return nil, "an ICMP probe of a Service address (kube-proxy forwards TCP, UDP and SCTP only)"
	}
	if len(svc.Spec.Selector) == 0 {
		return nil, "a Service without a selector: its endpoints are not read"
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == port && (svc.Spec.Ports[i].Protocol == "" || svc.Spec.Ports[i].Protocol == corev1.ProtocolTCP) {
			sp = &svc.Spec.Ports[i]
		}
	}
	if sp == nil {
		return nil, "the Service has no TCP port " + strconv.Itoa(int(port))
	}
	clusterIP, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		return nil, "the Service has no ClusterIP"
	}
	src := policyPodOf(vantage)
	var paths []netpolicy.Path
	for i := range backends {
		b := &backends[i]
		dst := policyPodOf(b)
		target := sp.TargetPort.IntVal
		switch {
		case sp.TargetPort.StrVal != "":
			target = 0
			for _, cp := range dst.Ports {
				if cp.Name == sp.TargetPort.StrVal && cp.Protocol == netpolicy.TCP {
					target = cp.Number
				}
			}
		case target == 0:
			target = sp.Port
		}
		var ip netip.Addr
		for _, a := range dst.IPs {
			if a.Unmap().Is4() == clusterIP.Unmap().Is4() {
				ip = a.Unmap()
				break
			}
		}
		if target == 0 || !ip.IsValid() {
			continue // not an endpoint on this port and family
		}
		paths = append(paths, netpolicy.Path{Source: netpolicy.End{Pod: src}, Destination: netpolicy.End{Pod: dst, IP: ip},
			Port: target, Protocol: netpolicy.TCP})
		if len(paths) == maxServiceEndpoints {
			break
		}
	}
	if len(paths) == 0 {
		return nil, "the Service has no running endpoint on that port"
	}
	return paths, ""
}

// isEndpoint says whether a pod a Service's selector selects can be one of its endpoints.
func isEndpoint(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && (p.Status.PodIP != "" || len(p.Status.PodIPs) > 0)
}
