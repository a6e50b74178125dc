// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package observation

import (
	"strconv"
	"strings"
	"time"

	"github.com/netpulse/netpulse/internal/contract"
)

// TargetKind is what a probe target is; the values are those of the PodNetworkHealth API.
type TargetKind string

// Target kinds.
const (
	TargetPod      TargetKind = "Pod"
	TargetNode     TargetKind = "Node"
	TargetExternal TargetKind = "External"
)

// Source is the probing pod (from the Resource).
type Source struct {
	Namespace string
	Name      string
	UID       string
	Node      string
	IP        string
	// Zone is the source node's zone (cloud.availability_zone on the Resource). On the
	// gateway it is the index's: admission removes what a sender put on the Resource
	// before k8s_net_attributes adds the zone of the bound pod's node.
	Zone string
}

// Heartbeat: the source published a probe round at At (contract.MetricRounds). Sharded
// gateways receive it from every agent, also in rounds in which none of the agent's targets
// is theirs: it keeps the observer reporting without being an observation of anything.
type Heartbeat struct {
	Source Source
	At     time.Time
}

// Target is what was probed (from data point attributes, enriched by k8s_net_attributes).
type Target struct {
	Kind      TargetKind
	Namespace string // Pod
	Name      string // Pod name, or Node name
	UID       string // Pod
	Node      string // the node the target runs on (Pod), or the node itself (Node)
	Zone      string
	Address   string // destination.address
	Port      int64  // destination.port, 0 when there is none
	// Endpoint is netpulse.target.endpoint: the URL or DNS question that tells external
	// targets on one address and port apart ("" otherwise).
	Endpoint string
}

// Observation is what one source observed of one target with one probe type in one probe
// round. The Decoder produces them from pod_probe metrics; tests and simulations build them
// directly.
type Observation struct {
	Source    Source
	Target    Target
	ProbeType string // one of the contract.ProbeType* values
	// Timestamp is the round's time: every data point of a round carries the same one.
	Timestamp time.Time
	// Stable: the source probes this target every round (netpulse.pair.stable): a stable
	// peer, a static or a DNS target. Only stable pairs (and failing ones) get objects.
	Stable bool
	// Success: the target answered (ICMP: at least one echo reply).
	Success bool
	// TargetLeaving: k8s_net_attributes found the target pod terminating or deleted
	// (contract.DestinationPodLeaving) when the observation passed the gateway.
	TargetLeaving bool
	// TargetDisruption: k8s_net_attributes found the target going away or down for a
	// reason the cluster reports (contract.DestinationDisruption: PodTerminating,
	// NodeNotReady, NodeDraining, NotReady); failures towards it then blame no network.
	TargetDisruption string
	// PathMTU is the round's path-MTU probe (pod_probe's icmp.path_mtu; zero when none).
	PathMTU PathMTU
	// ErrorType is the contract's error.type of a failure ("" when unknown or on success).
	ErrorType string
	// Message describes a failure for humans.
	Message string
	// Sent and Lost are the ICMP echoes of this round (0 and 0 when unknown or not ICMP).
	Sent, Lost uint64
	// LossRatio is Lost/Sent, or the loss gauge when the counters are unknown; valid only
	// when HasLoss.
	LossRatio float64
	HasLoss   bool
	// RTT holds this round's samples in seconds: ICMP round-trip times, otherwise the
	// duration of the successful probe. Empty when none.
	RTT Histogram
}

// PairKey identifies a (source pod -> target) pair: one PodNetworkHealth object. It is
// comparable (a map key). Only the fields of the target's kind are set: Pod: namespace,
// name, UID; Node: name (the address when the name is unknown); External: the address.
type PairKey struct {
	SourceNamespace string
	SourcePod       string
	SourceUID       string
	TargetKind      TargetKind
	TargetNamespace string
	TargetName      string
	TargetUID       string
	TargetAddress   string
	// TargetPort and TargetEndpoint (External only): each configured external target -
	// host:port, URL, DNS question - is its own pair.
	TargetPort     int64
	TargetEndpoint string
}

// KeyOf returns the pair an observation belongs to.
func KeyOf(o *Observation) PairKey {
	k := PairKey{
		SourceNamespace: o.Source.Namespace,
		SourcePod:       o.Source.Name,
		SourceUID:       o.Source.UID,
		TargetKind:      o.Target.Kind,
	}
	switch o.Target.Kind {
	case TargetPod:
		k.TargetNamespace, k.TargetName, k.TargetUID = o.Target.Namespace, o.Target.Name, o.Target.UID
	case TargetNode:
		k.TargetName = o.Target.Name
		if k.TargetName == "" {
			k.TargetAddress = o.Target.Address
		}
	default:
		k.TargetKind = TargetExternal
		k.TargetAddress, k.TargetPort, k.TargetEndpoint = o.Target.Address, o.Target.Port, o.Target.Endpoint
	}
	return k
}

// String renders the key for logs and stable ordering, e.g.
// "ns/agent-a(uid)->Pod:ns/agent-b(uid)" or "ns/agent-a(uid)->External:192.0.2.10".
func (k PairKey) String() string {
	var b strings.Builder
	b.WriteString(k.SourceNamespace + "/" + k.SourcePod + "(" + k.SourceUID + ")->" + string(k.TargetKind) + ":")
	switch k.TargetKind {
	case TargetPod:
		b.WriteString(k.TargetNamespace + "/" + k.TargetName + "(" + k.TargetUID + ")")
	default:
		if k.TargetName != "" {
			b.WriteString(k.TargetName)
		} else {
			b.WriteString(EndpointText(k.TargetAddress, k.TargetPort, k.TargetEndpoint))
		}
	}
	return b.String()
}

// EndpointText names an external target: address[:port], then its endpoint (URL or DNS
// question) when it has one.
func EndpointText(addr string, port int64, endpoint string) string {
	t := Target{Address: addr, Port: port, Endpoint: endpoint}
	return t.TargetText()
}

// Less orders keys (field by field).
func (k PairKey) Less(o PairKey) bool {
	a := [...]string{k.SourceNamespace, k.SourcePod, k.SourceUID, string(k.TargetKind), k.TargetNamespace, k.TargetName, k.TargetUID, k.TargetAddress}
	b := [...]string{o.SourceNamespace, o.SourcePod, o.SourceUID, string(o.TargetKind), o.TargetNamespace, o.TargetName, o.TargetUID, o.TargetAddress}
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	if k.TargetPort != o.TargetPort {
		return k.TargetPort < o.TargetPort
	}
	return k.TargetEndpoint < o.TargetEndpoint
}

// Valid reports whether the key names a source and a target.
func (k PairKey) Valid() bool { return k.valid() }

// valid reports whether the key names a source and a target.
func (k PairKey) valid() bool {
	if k.SourceNamespace == "" || (k.SourcePod == "" && k.SourceUID == "") {
		return false
	}
	switch k.TargetKind {
	case TargetPod:
		return k.TargetUID != "" || (k.TargetName != "" && k.TargetNamespace != "")
	case TargetNode:
		return k.TargetName != "" || k.TargetAddress != ""
	default:
		return k.TargetAddress != ""
	}
}

// ProbeIndex is t's place in the contract's probe types (contract.ProbeTypes: icmp, tcp,
// http, dns), -1 for any other value.
func ProbeIndex(t string) int {
	for i, p := range contract.ProbeTypes {
		if p == t {
			return i
		}
	}
	return -1
}

// ProbeTypes are the contract's probe types, in ProbeIndex order.
var ProbeTypes = contract.ProbeTypes

const NumProbeTypes = len(ProbeTypes)

// FailureReason maps a contract error.type to the CamelCase reason the PodNetworkHealth API
// uses for probe failures and outages (api/v1alpha1 FailureReason*): timeout -> Timeout,
// refused -> ConnectionRefused, unreachable -> HostUnreachable, dns_error -> DNSError,
// tls_error -> TLSError, http_status -> HTTPStatus, anything else (other, permission,
// unknown, "") -> Error.
func FailureReason(errorType string) string {
	switch errorType {
	case contract.ErrorTypeTimeout:
		return "Timeout"
	case contract.ErrorTypeRefused:
		return "ConnectionRefused"
	case contract.ErrorTypeUnreachable:
		return "HostUnreachable"
	case contract.ErrorTypeDNS:
		return "DNSError"
	case contract.ErrorTypeTLS:
		return "TLSError"
	case contract.ErrorTypeHTTPStatus:
		return "HTTPStatus"
	}
	return "Error"
}

// Address families (the contract's network.type values).
const (
	FamilyIPv4 = contract.NetworkTypeIPv4
	FamilyIPv6 = contract.NetworkTypeIPv6
)

// Family is the address family of the target address: ipv6 when it has a colon (an IPv6
// literal), else ipv4 (IPv4 literals and host names).
func (t *Target) Family() string {
	if strings.Contains(t.Address, ":") {
		return FamilyIPv6
	}
	return FamilyIPv4
}

// targetText renders address[:port] for messages.
func (t *Target) TargetText() string {
	s := t.Address
	switch {
	case t.Port == 0:
	case strings.Contains(t.Address, ":"):
		s = "[" + t.Address + "]:" + strconv.FormatInt(t.Port, 10)
	default:
		s = t.Address + ":" + strconv.FormatInt(t.Port, 10)
	}
	if t.Endpoint != "" {
		s += " " + t.Endpoint
	}
	return s
}

// MergeTarget fills fields of t that are empty from o (points of one group agree; a field
// missing on one of them is taken from another).
func MergeTarget(t, o *Target) {
	if t.Kind == TargetExternal && o.Kind != TargetExternal {
		addr, port := t.Address, t.Port
		*t = *o
		t.Address, t.Port = addr, port
		return
	}
	if t.Kind != o.Kind {
		return
	}
	for _, f := range []struct{ dst, src *string }{
		{&t.Namespace, &o.Namespace}, {&t.Name, &o.Name}, {&t.UID, &o.UID}, {&t.Node, &o.Node}, {&t.Zone, &o.Zone},
	} {
		if *f.dst == "" {
			*f.dst = *f.src
		}
	}
}

// PathMTU is one path-MTU probe's outcome: Status (contract.PathMTU*) and the largest IP
// packet in bytes known to pass.
type PathMTU struct {
	Status string
	Bytes  int
}
