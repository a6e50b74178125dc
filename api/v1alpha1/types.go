/*
Copyright The netpulse Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netpulse/netpulse/internal/contract"
)

// PodNetworkHealth is the observed network health of one (source pod -> target) pair: can the
// source pod reach the target, how fast, with how much loss, and since when. The object lives
// in the source pod's namespace and is owned by the source pod. The spec names the pair and
// is immutable; the status is written by the pod_network_health exporter.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=podnetworkhealths,singular=podnetworkhealth,shortName=pnh,categories=netpulse,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.spec.sourcePodRef.name`,description="Name of the source (probing) pod."
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetPodRef.name`,description="Name of the target pod (targetKind Pod; see -o wide for Node and External targets)."
// +kubebuilder:printcolumn:name="Reachable",type=string,JSONPath=`.status.reachability`,description="Reachable, Unreachable or Unknown."
// +kubebuilder:printcolumn:name="RTT P50",type=string,JSONPath=`.status.latency.p50`,description="Median round-trip time over the observation window."
// +kubebuilder:printcolumn:name="Loss",type=string,JSONPath=`.status.lossRatio`,description="Share of probes lost over the observation window (0 to 1)."
// +kubebuilder:printcolumn:name="Degraded",type=string,JSONPath=`.status.conditions[?(@.type=="Degraded")].reason`,description="The Degraded condition's reason: WithinThresholds, or why the reachable target is not well (PacketLoss, HighLatency, MTUBlackHole, AddressFamilyUnreachable); NotReachable while not Reachable."
// +kubebuilder:printcolumn:name="Since",type=date,JSONPath=`.status.conditions[?(@.type=="Reachable")].lastTransitionTime`,description="How long the current verdict has held: the Reachable condition's last transition."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Target Kind",type=string,JSONPath=`.spec.targetKind`,priority=1,description="Pod, Node or External."
// +kubebuilder:printcolumn:name="Target Node",type=string,JSONPath=`.spec.targetNodeRef.name`,priority=1,description="Target node (targetKind Node)."
// +kubebuilder:printcolumn:name="Target Address",type=string,JSONPath=`.spec.targetEndpoint.address`,priority=1,description="Target address (targetKind External)."
// +kubebuilder:printcolumn:name="RTT P99",type=string,JSONPath=`.status.latency.p99`,priority=1,description="99th percentile round-trip time over the observation window."
// +kubebuilder:printcolumn:name="Observer",type=string,JSONPath=`.status.observedFromNode`,priority=1,description="Node the observations were made from."
// +kubebuilder:printcolumn:name="Written",type=date,JSONPath=`.status.lastObservedTime`,priority=1,description="The newest observation in the last written status. An unchanged status is rewritten only at the heartbeat, or never beside a writer Lease; status.freshUntil or that Lease says whether it is current."
// +kubebuilder:selectablefield:JSONPath=`.spec.sourcePodRef.name`
// +kubebuilder:selectablefield:JSONPath=`.spec.targetKind`
// +kubebuilder:selectablefield:JSONPath=`.spec.targetPodRef.namespace`
// +kubebuilder:selectablefield:JSONPath=`.spec.targetPodRef.name`
// +kubebuilder:selectablefield:JSONPath=`.spec.targetNodeRef.name`
// +kubebuilder:selectablefield:JSONPath=`.status.reachability`
// +kubebuilder:selectablefield:JSONPath=`.status.observedFromNode`
type PodNetworkHealth struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata. The name is chosen by the writer; the
	// namespace is the source pod's namespace.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the observed pair. It is immutable.
	// +required
	Spec PodNetworkHealthSpec `json:"spec"`

	// status is the observed health of the pair.
	// +optional
	Status PodNetworkHealthStatus `json:"status,omitempty"`
}

// PodNetworkHealthSpec names the observed pair: the source pod and exactly one target,
// selected by targetKind (a discriminated union: the member matching targetKind is required,
// the others are forbidden).
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: a PodNetworkHealth describes one (source, target) pair"
// +kubebuilder:validation:XValidation:rule="!has(self.targetKind) || self.targetKind != 'Pod' || has(self.targetPodRef)",message="targetPodRef is required when targetKind is Pod",fieldPath=".targetPodRef",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.targetKind) || self.targetKind == 'Pod' || !has(self.targetPodRef)",message="targetPodRef may only be set when targetKind is Pod",fieldPath=".targetPodRef",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.targetKind) || self.targetKind != 'Node' || has(self.targetNodeRef)",message="targetNodeRef is required when targetKind is Node",fieldPath=".targetNodeRef",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.targetKind) || self.targetKind == 'Node' || !has(self.targetNodeRef)",message="targetNodeRef may only be set when targetKind is Node",fieldPath=".targetNodeRef",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.targetKind) || self.targetKind != 'External' || has(self.targetEndpoint)",message="targetEndpoint is required when targetKind is External",fieldPath=".targetEndpoint",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.targetKind) || self.targetKind == 'External' || !has(self.targetEndpoint)",message="targetEndpoint may only be set when targetKind is External",fieldPath=".targetEndpoint",reason=FieldValueForbidden
type PodNetworkHealthSpec struct {
	// sourcePodRef is the pod the probes are sent from (the observer's pod). Its namespace is
	// the namespace of this object.
	// +required
	SourcePodRef PodReference `json:"sourcePodRef"`

	// targetKind says what the target is: Pod (a pod, including host-network pods; set
	// targetPodRef), Node (a node's own address; set targetNodeRef) or External (an address
	// outside the cluster's pods and nodes; set targetEndpoint).
	// +required
	TargetKind TargetKind `json:"targetKind"`

	// targetPodRef is the target pod. Required when targetKind is Pod, forbidden otherwise.
	// +optional
	TargetPodRef *PodReference `json:"targetPodRef,omitempty"`

	// targetNodeRef is the target node. Required when targetKind is Node, forbidden otherwise.
	// +optional
	TargetNodeRef *NodeReference `json:"targetNodeRef,omitempty"`

	// targetEndpoint is the external target. Required when targetKind is External, forbidden
	// otherwise.
	// +optional
	TargetEndpoint *EndpointReference `json:"targetEndpoint,omitempty"`
}

// TargetKind is the kind of a probe target.
// +kubebuilder:validation:Enum=Pod;Node;External
type TargetKind string

// Target kinds.
const (
	// TargetKindPod is a pod (on the pod network or the host network).
	TargetKindPod TargetKind = "Pod"
	// TargetKindNode is a node's own address (host network, no pod involved).
	TargetKindNode TargetKind = "Node"
	// TargetKindExternal is an address that is neither a known pod nor a node.
	TargetKindExternal TargetKind = "External"
)

// PodReference identifies a pod, in the vocabulary of the Pod Network Health API proposal.
type PodReference struct {
	// namespace of the pod.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`

	// name of the pod.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// uid of the pod, when known. When set, the object is about this incarnation of the pod:
	// a pod recreated under the same name is a different target.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=36
	UID types.UID `json:"uid,omitempty"`
}

// NodeReference identifies a node.
type NodeReference struct {
	// name of the node.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// uid of the node, when known.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=36
	UID types.UID `json:"uid,omitempty"`
}

// EndpointReference identifies a target outside the cluster's pods and nodes.
type EndpointReference struct {
	// address is an IP address (IPv4 or IPv6, without zone) or a lower-case DNS name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="isIP(self) || !format.dns1123Subdomain().validate(self).hasValue()",message="address must be an IP address or a lower-case DNS name"
	Address string `json:"address"`

	// port of the target (tcp, http and dns probes), when it has one: each port is its own
	// target.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// endpoint tells external targets on one address and port apart: the URL of an http(s)
	// target (without user info, query or fragment) or the question of a DNS probe
	// ("<name> <type>", e.g. "kubernetes.default.svc.cluster.local. A"). Each is its own
	// target with its own object.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Endpoint string `json:"endpoint,omitempty"`
}

// Reachability is the summary verdict for a pair.
// +kubebuilder:validation:Enum=Reachable;Unreachable;Unknown
type Reachability string

// Reachability values.
const (
	// Reachable: probes succeeded within the observation window.
	Reachable Reachability = "Reachable"
	// Unreachable: every probe within the observation window failed.
	Unreachable Reachability = "Unreachable"
	// ReachabilityUnknown: no usable observations (none yet, too old, or the observers are
	// judged broken rather than the target).
	ReachabilityUnknown Reachability = "Unknown"
)

// ProbeType is a kind of probe. The enum is the telemetry contract's probe types
// (contract.ProbeTypes); a test keeps the two equal.
// +kubebuilder:validation:Enum=icmp;tcp;http;dns
type ProbeType string

// Probe types: the probe-type attribute's values of the telemetry (internal/contract).
const (
	ProbeTypeICMP ProbeType = contract.ProbeTypeICMP
	ProbeTypeTCP  ProbeType = contract.ProbeTypeTCP
	ProbeTypeHTTP ProbeType = contract.ProbeTypeHTTP
	ProbeTypeDNS  ProbeType = contract.ProbeTypeDNS
)

// PodNetworkHealthStatus is the observed health of the pair over the observation window
// that ends at lastObservedTime.
type PodNetworkHealthStatus struct {
	// reachability is the verdict: Reachable, Unreachable or Unknown. It mirrors the status of
	// the Reachable condition (True, False, Unknown) as a single field for printer columns
	// and field selectors.
	// +optional
	Reachability Reachability `json:"reachability,omitempty"`

	// latency summarises the round-trip times of successful probes of all types over the
	// observation window. Absent when no probe succeeded.
	// +optional
	Latency *LatencySummary `json:"latency,omitempty"`

	// lossRatio is the share of probes of all types that were lost over the observation
	// window, as a decimal string from "0" to "1" (for example "0.0125").
	// +optional
	LossRatio Ratio `json:"lossRatio,omitempty"`

	// window is the length of the observation window the figures in this status (latency,
	// lossRatio, probes) cover; the window ends at lastObservedTime.
	// +optional
	Window Duration `json:"window,omitempty"`

	// lastObservedTime is the time of the most recent observation in this status, as of
	// when it was written. An unchanged status is rewritten only at the heartbeat (or never,
	// when its writer keeps a Lease: see freshUntil), so on a healthy pair this is the time
	// of the last write, not of the last probe: whether the status is still current is what
	// freshUntil, or the writer's Lease, says.
	// +optional
	LastObservedTime *metav1.Time `json:"lastObservedTime,omitempty"`

	// freshUntil is the time before which the writer rewrites this status while it keeps
	// observing the pair: lastObservedTime plus twice the heartbeat interval in force when
	// it was written (the interval stretches with the object count to fit the write
	// budget). Until then an unchanged status is current, however old lastObservedTime
	// looks; past it the status is stale (its writer stopped, lost the pair, or had no
	// budget for it). A silent observer is reported sooner, by the Reachable condition
	// (Unknown/ObserverSilent). Absent when the writer keeps a Lease (the exporter's
	// freshness: lease, its default beside a NetworkHealthSummary): then the status is
	// rewritten only on news and is current while the Lease that the summary of its writer
	// names (status.leaseName; the summary of the object's netpulse.io/shard, or the only
	// one) is held and renewed, however old lastObservedTime is.
	// +optional
	FreshUntil *metav1.Time `json:"freshUntil,omitempty"`

	// observedFromNode is the node the observations were made from: the source pod's node.
	// When several observers contributed, the node of the most recent observation.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ObservedFromNode string `json:"observedFromNode,omitempty"`

	// observerCount is the number of distinct observers (collector instances) whose results
	// were merged into this status; 1 unless a gateway aggregated several.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ObserverCount int32 `json:"observerCount,omitempty"`

	// probes holds one result per probe type, over the observation window.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=4
	Probes []ProbeResult `json:"probes,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// outages is the bounded outage history of the pair, newest first: at most 20 entries,
	// the oldest dropped first. Only the newest entry may be ongoing (no end); each older
	// outage ended before the next newer one started. The same semantics as the outages of
	// OpenShift's PodNetworkConnectivityCheck.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:XValidation:rule="self.all(i, o, i == 0 || has(o.end))",message="only the newest (first) outage may be ongoing (without end)"
	// +kubebuilder:validation:XValidation:rule="self.all(i, o, i == 0 || !has(o.end) || o.end <= self[i-1].start)",message="outages must be ordered newest first and must not overlap: each outage must end before the previous (newer) entry starts"
	Outages []Outage `json:"outages,omitempty"`

	// conditions are the standard conditions of the object; the Reachable condition is
	// always present once the status has been written (see the ConditionReachable and
	// Reason* constants). Condition types and reasons are at most 64 characters, messages at
	// most 256, which keeps the object small.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:XValidation:rule="self.all(c, size(c.type) <= 64)",message="condition types must be at most 64 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(c, size(c.reason) <= 64)",message="condition reasons must be at most 64 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(c, size(c.message) <= 256)",message="condition messages must be at most 256 characters"
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// LatencySummary summarises round-trip times (RTT) of successful probes. The quantiles are
// estimates (typically from a histogram); they are ordered p50 <= p90 <= p99 <= max.
//
// +kubebuilder:validation:XValidation:rule="duration(self.p50) <= duration(self.p90) && duration(self.p90) <= duration(self.p99) && duration(self.p99) <= duration(self.max)",message="latency quantiles must be ordered: p50 <= p90 <= p99 <= max"
type LatencySummary struct {
	// p50 is the median RTT.
	// +required
	P50 Duration `json:"p50"`
	// p90 is the 90th percentile RTT.
	// +required
	P90 Duration `json:"p90"`
	// p99 is the 99th percentile RTT.
	// +required
	P99 Duration `json:"p99"`
	// max is the largest RTT observed.
	// +required
	Max Duration `json:"max"`
}

// ProbeResult is what one probe type observed over the observation window.
//
// +kubebuilder:validation:XValidation:rule="self.lost <= self.sent",message="lost must not exceed sent",fieldPath=".lost"
type ProbeResult struct {
	// type is the probe type: icmp, tcp, http or dns.
	// +required
	Type ProbeType `json:"type"`

	// sent is the number of probes of this type sent over the observation window.
	// +required
	// +kubebuilder:validation:Minimum=0
	Sent int32 `json:"sent"`

	// lost is the number of those probes that failed or got no answer in time.
	// +required
	// +kubebuilder:validation:Minimum=0
	Lost int32 `json:"lost"`

	// latency summarises the RTTs of the successful probes of this type. Absent when none
	// succeeded.
	// +optional
	Latency *LatencySummary `json:"latency,omitempty"`

	// lastSuccessTime is when a probe of this type last succeeded (possibly before the
	// observation window).
	// +optional
	LastSuccessTime *metav1.Time `json:"lastSuccessTime,omitempty"`

	// lastFailure is the most recent failure of a probe of this type (possibly before the
	// observation window).
	// +optional
	LastFailure *ProbeFailure `json:"lastFailure,omitempty"`
}

// ProbeFailure describes one failed probe.
type ProbeFailure struct {
	// time is when the probe failed.
	// +required
	Time metav1.Time `json:"time"`

	// reason is a machine-readable, low-cardinality CamelCase cause (see the FailureReason*
	// constants), like a condition reason.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`
	Reason string `json:"reason"`

	// message is a human-readable description of the failure.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`
}

// Outage is one period during which the target was unreachable from the source.
//
// +kubebuilder:validation:XValidation:rule="!has(self.end) || self.end >= self.start",message="end must not be before start",fieldPath=".end"
type Outage struct {
	// start is when the outage began (the first failed observation).
	// +required
	Start metav1.Time `json:"start"`

	// end is when the outage ended (the first successful observation after it). Absent while
	// the outage is ongoing.
	// +optional
	End *metav1.Time `json:"end,omitempty"`

	// reason is a machine-readable CamelCase cause of the outage (the failure reason that
	// started it).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`
	Reason string `json:"reason,omitempty"`

	// message summarises the outage for humans.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`

	// flaps counts how often the pair came back and failed again within the exporter's
	// flap_window: a flapping period is one entry (from its first failure to its last
	// recovery), not one entry per cycle. Absent when the outage did not flap.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Flaps int32 `json:"flaps,omitempty"`
}

// PodNetworkHealthList is a list of PodNetworkHealth objects.
//
// +kubebuilder:object:root=true
type PodNetworkHealthList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodNetworkHealth `json:"items"`
}
