/*
Copyright The netpulse Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NetworkCheck is a declared point-to-point check: a user names a source pod (in the
// check's namespace) and a target (a pod, a Service, a host:port or an http(s) URL), and
// netpulse probes the target from the source pod's own network namespace when a netpulse
// sidecar runs in it, else from the netpulse agent on the source pod's node, and keeps the
// result in the status: reachability, latency, the recent successes and failures, the
// outage history and the Reachable condition, with OpenShift PodNetworkConnectivityCheck
// semantics. The spec is the user's; the status is written by the gateway's
// pod_network_health exporter (docs/checks.md).
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=networkchecks,singular=networkcheck,shortName=netcheck,categories=netpulse,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.status.vantage.sourcePod`,description="The source pod the check runs for."
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.status.target.endpoint`,description="The endpoint probed (address:port or URL)."
// +kubebuilder:printcolumn:name="Probe",type=string,JSONPath=`.spec.probe`
// +kubebuilder:printcolumn:name="Reachable",type=string,JSONPath=`.status.reachability`,description="Reachable, Unreachable or Unknown."
// +kubebuilder:printcolumn:name="Latency",type=string,JSONPath=`.status.latency.p50`,description="Median latency of the recent successes."
// +kubebuilder:printcolumn:name="Vantage",type=string,JSONPath=`.status.vantage.mode`,description="Sidecar (from the source pod itself) or Agent (from the agent on its node)."
// +kubebuilder:printcolumn:name="Last Probe",type=date,JSONPath=`.status.lastProbeTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.vantage.node`,priority=1
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].reason`,priority=1
// +kubebuilder:selectablefield:JSONPath=`.status.reachability`
// +kubebuilder:selectablefield:JSONPath=`.status.vantage.node`
// +kubebuilder:selectablefield:JSONPath=`.status.vantage.sourcePod`
type NetworkCheck struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares the check.
	// +required
	Spec NetworkCheckSpec `json:"spec"`

	// status is the observed result of the check.
	// +optional
	Status NetworkCheckStatus `json:"status,omitempty"`
}

// NetworkCheckSpec declares a check: from where, to what, how and how often.
//
// +kubebuilder:validation:XValidation:rule="!has(self.probe) || self.probe != 'http' || has(self.target.url)",message="probe http needs a url target",fieldPath=".probe"
// +kubebuilder:validation:XValidation:rule="!has(self.target.url) || !has(self.probe) || self.probe == 'http'",message="a url target is probed with http",fieldPath=".probe"
// +kubebuilder:validation:XValidation:rule="!has(self.probe) || self.probe != 'icmp' || !has(self.target.address)",message="probe icmp takes a pod or service target (an address target is host:port, a TCP endpoint)",fieldPath=".probe"
// +kubebuilder:validation:XValidation:rule="!has(self.target.pod) || has(self.target.pod.port) || (has(self.probe) && self.probe == 'icmp')",message="a pod target needs a port unless the probe is icmp",fieldPath=".target.pod.port"
type NetworkCheckSpec struct {
	// source is the pod the check runs for, in the check's namespace: a user who may create
	// checks in a namespace can make netpulse probe from that namespace's pods only.
	// +required
	Source CheckSource `json:"source"`

	// target is what is checked: exactly one of pod, service, address or url.
	// +required
	Target CheckTarget `json:"target"`

	// probe is how the target is checked: tcp (a TCP connect, after a DNS lookup when the
	// host is a name, as OpenShift's checker does), http (a GET of the url; never follows
	// redirects to other hosts, never sends credentials) or icmp (an echo to a pod or a
	// Service's ClusterIP). Default: http for a url target, tcp otherwise.
	// +optional
	// +kubebuilder:validation:Enum=tcp;http;icmp
	Probe ProbeType `json:"probe,omitempty"`

	// interval between two runs of the check. Default 60s; at least 10s, at most 1h.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s') && duration(self) <= duration('1h')",message="interval must be between 10s and 1h"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// timeout of one run. Default 5s; at least 100ms and less than the interval.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('30s')",message="timeout must be between 100ms and 30s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// CheckSource selects the source pod: exactly one of podName and podSelector.
//
// +kubebuilder:validation:XValidation:rule="has(self.podName) != has(self.podSelector)",message="exactly one of podName and podSelector"
type CheckSource struct {
	// podName is the source pod's name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	PodName string `json:"podName,omitempty"`

	// podSelector selects the source pod by labels: of the Running pods it matches, the one
	// with the oldest creation time (then the smallest name) is used, and the status names
	// it. When that pod goes away the next one takes over.
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
}

// CheckTarget is what a check probes: exactly one member is set.
//
// +kubebuilder:validation:XValidation:rule="(has(self.pod) ? 1 : 0) + (has(self.service) ? 1 : 0) + (has(self.address) ? 1 : 0) + (has(self.url) ? 1 : 0) == 1",message="exactly one of pod, service, address and url"
type CheckTarget struct {
	// pod is a target pod (its pod IP).
	// +optional
	Pod *CheckPodTarget `json:"pod,omitempty"`

	// service is a target Service, probed at its ClusterIP and port, as a client in the
	// source pod would reach it.
	// +optional
	Service *CheckServiceTarget `json:"service,omitempty"`

	// address is a TCP endpoint "host:port" (host an IP address or a DNS name, IPv6 in
	// brackets), the form of OpenShift's targetEndpoint. A name is resolved where the probe
	// runs, and a lookup failure is a DNSError.
	// +optional
	// +kubebuilder:validation:MaxLength=261
	// +kubebuilder:validation:Pattern=`^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}$`
	Address string `json:"address,omitempty"`

	// url is an http or https URL, without user information.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (url(self).getScheme() == 'http' || url(self).getScheme() == 'https') && !self.contains('@')",message="url must be an http(s) URL without user information"
	URL string `json:"url,omitempty"`
}

// CheckPodTarget names a target pod.
type CheckPodTarget struct {
	// name of the pod.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// namespace of the pod; default: the check's namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`

	// port for tcp and http probes.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
}

// CheckServiceTarget names a target Service and port.
type CheckServiceTarget struct {
	// name of the Service.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// namespace of the Service; default: the check's namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`

	// port of the Service (its port, not the target port).
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// NetworkCheckStatus is what the check observed. The successes, failures and outages have
// the semantics (and the limits) of OpenShift's PodNetworkConnectivityCheck; they are
// written when something significant changes (the Reachable condition, an outage starts or
// ends, the failure mode changes) and otherwise as a heartbeat, so the newest successes may
// be up to one heartbeat older than lastProbeTime.
type NetworkCheckStatus struct {
	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// vantage is where the probe runs from.
	// +optional
	Vantage *CheckVantage `json:"vantage,omitempty"`

	// target is the endpoint the probe reaches, as resolved by netpulse.
	// +optional
	Target *CheckResolvedTarget `json:"target,omitempty"`

	// reachability mirrors the Reachable condition: Reachable, Unreachable or Unknown.
	// +optional
	Reachability Reachability `json:"reachability,omitempty"`

	// latency summarises the latencies of the recent successes.
	// +optional
	Latency *LatencySummary `json:"latency,omitempty"`

	// lastProbeTime is the time of the most recent run the gateway knew of when it wrote
	// this status.
	// +optional
	LastProbeTime *metav1.Time `json:"lastProbeTime,omitempty"`

	// successes are the most recent successful runs, newest first (at most 10).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Successes []CheckLogEntry `json:"successes,omitempty"`

	// failures are the most recent failed runs, newest first (at most 10).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Failures []CheckLogEntry `json:"failures,omitempty"`

	// outages is the outage history, newest first (at most 20); only the newest may be
	// ongoing (without end).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	Outages []CheckOutage `json:"outages,omitempty"`

	// conditions: Accepted (the check could be placed: its source pod exists, its target
	// resolves and is allowed by the target policy, a vantage point runs) and Reachable.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=4
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// VantageMode is where a check's probe runs from.
// +kubebuilder:validation:Enum=Sidecar;Agent
type VantageMode string

// Vantage modes.
const (
	// VantageSidecar: a netpulse sidecar in the source pod, from the pod's own network
	// namespace and addresses.
	VantageSidecar VantageMode = "Sidecar"
	// VantageAgent: the netpulse agent on the source pod's node, from the agent pod's
	// addresses (the source pod has no sidecar).
	VantageAgent VantageMode = "Agent"
)

// CheckVantage says where a check runs from.
type CheckVantage struct {
	// mode is Sidecar or Agent.
	// +required
	Mode VantageMode `json:"mode"`

	// sourcePod is the source pod's name (the selected one, for a podSelector).
	// +required
	// +kubebuilder:validation:MaxLength=253
	SourcePod string `json:"sourcePod"`

	// node is the source pod's node.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node,omitempty"`

	// observerPod is the pod that runs the probe: the source pod itself (Sidecar) or the
	// agent pod on its node (Agent), as "namespace/name", once it has reported.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	ObserverPod string `json:"observerPod,omitempty"`

	// sourceAddress is the local address the probes leave from, as last reported.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	SourceAddress string `json:"sourceAddress,omitempty"`
}

// CheckResolvedTarget is the endpoint a check probes.
type CheckResolvedTarget struct {
	// endpoint is "address:port", "host:port" or the URL (for icmp: the address).
	// +required
	// +kubebuilder:validation:MaxLength=512
	Endpoint string `json:"endpoint"`

	// kind is Pod, Service, Address or URL.
	// +required
	// +kubebuilder:validation:Enum=Pod;Service;Address;URL
	Kind string `json:"kind"`
}

// CheckLogEntry is one run of a check, as OpenShift's LogEntry.
type CheckLogEntry struct {
	// time the run started.
	// +required
	Time metav1.Time `json:"time"`

	// success of the run.
	// +required
	Success bool `json:"success"`

	// reason in a machine-readable form: TCPConnect, TCPConnectError, DNSResolve, DNSError,
	// HTTPRequest, HTTPError, ICMPEcho, ICMPError or TargetRefused.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`

	// message for humans.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`

	// latency of the run's probe.
	// +optional
	Latency Duration `json:"latency,omitempty"`
}

// CheckOutage is one period during which the check failed, as OpenShift's OutageEntry.
//
// +kubebuilder:validation:XValidation:rule="!has(self.end) || self.end >= self.start",message="end must not be before start",fieldPath=".end"
type CheckOutage struct {
	// start is the first failed run.
	// +required
	Start metav1.Time `json:"start"`

	// end is the first successful run after it; absent while ongoing.
	// +optional
	End *metav1.Time `json:"end,omitempty"`

	// startLogs: the failure that started the outage and each failure that changed its
	// mode (at most 5).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=5
	StartLogs []CheckLogEntry `json:"startLogs,omitempty"`

	// endLogs: the success that ended the outage and the failures just before it (at most 5).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=5
	EndLogs []CheckLogEntry `json:"endLogs,omitempty"`

	// message summarises the outage for humans.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`
}

// NetworkCheckList is a list of NetworkCheck objects.
//
// +kubebuilder:object:root=true
type NetworkCheckList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NetworkCheck `json:"items"`
}

// NetworkCheck names and condition types.
const (
	NetworkCheckKind     = "NetworkCheck"
	NetworkCheckListKind = "NetworkCheckList"
	NetworkCheckPlural   = "networkchecks"
	NetworkCheckCRDName  = NetworkCheckPlural + "." + GroupName

	// ConditionAccepted is True when the check is placed and running.
	ConditionAccepted = "Accepted"

	// Reasons of the Accepted condition.
	ReasonCheckAccepted  = "Accepted"
	ReasonSourceNotFound = "SourceNotFound"
	ReasonSourceNotReady = "SourceNotRunning"
	ReasonTargetNotFound = "TargetNotFound"
	ReasonTargetRefused  = "TargetRefused"
	ReasonNoVantagePoint = "NoVantagePoint"
	ReasonInvalidCheck   = "InvalidCheck"
	// ReasonTargetOutsideNamespace: the target pod or Service is in another namespace and
	// the gateway's checks.allow_cross_namespace_targets is off; nothing was looked up.
	ReasonTargetOutsideNamespace = "TargetOutsideNamespace"
	// ReasonNamespaceQuotaExceeded: the namespace has more checks than the gateway's
	// checks.max_checks_per_namespace; the oldest are served, this one is not.
	ReasonNamespaceQuotaExceeded = "NamespaceQuotaExceeded"
	ReasonCheckProbeAgent        = "ProbedByAgent"

	// Labels the gateway puts on a check (NetworkCheck and PodNetworkConnectivityCheck) so
	// that only its vantage point lists and watches it: the agent of that node
	// (LabelVantageNode) or the sidecar of that pod (LabelVantagePod, in the namespace).
	LabelVantageNode = "netpulse.io/vantage-node"
	LabelVantagePod  = "netpulse.io/vantage-pod"
	LabelVantageMode = "netpulse.io/vantage-mode"
	// LabelSidecar on a pod says a netpulse sidecar runs in it (set by the sidecar patch
	// and the OpenTelemetry Operator example).
	LabelSidecar = "netpulse.io/sidecar"
	// AnnotationCheckInterval overrides the interval of a PodNetworkConnectivityCheck
	// (whose spec has none); default 60s, at least 10s.
	AnnotationCheckInterval = "netpulse.io/check-interval"
)
