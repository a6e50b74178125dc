/*
Copyright The netpulse Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// PodNetworkConnectivityCheck is OpenShift's point-to-point network check.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=podnetworkconnectivitychecks,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Target Endpoint",type=string,JSONPath=".spec.targetEndpoint",description="The endpoint being checked"
// +kubebuilder:printcolumn:name="Reachable",type=string,JSONPath=".status.conditions[?(@.type==\"Reachable\")].status",description="Whether the target endpoint is reachable"
// +kubebuilder:printcolumn:name="Since",type=date,JSONPath=".status.conditions[?(@.type==\"Reachable\")].lastTransitionTime",description="The time the reachability status last changed"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type PodNetworkConnectivityCheck struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object's metadata.
	metav1.ObjectMeta `json:"metadata"`

	// spec defines the source and target of the connectivity check
	// +required
	Spec PodNetworkConnectivityCheckSpec `json:"spec"`

	// status contains the observed status of the connectivity check
	// +optional
	Status PodNetworkConnectivityCheckStatus `json:"status,omitempty"`
}

// PodNetworkConnectivityCheckSpec names the source pod and the target endpoint.
type PodNetworkConnectivityCheckSpec struct {
	// sourcePod names the pod from which the condition will be checked
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	SourcePod string `json:"sourcePod"`

	// EndpointAddress to check. A TCP address of the form host:port. Note that
	// if host is a DNS name, then the check would fail if the DNS name cannot
	// be resolved. Specify an IP address for host to bypass DNS name lookup.
	// +kubebuilder:validation:Pattern=`^\S+:\d*$`
	// +required
	TargetEndpoint string `json:"targetEndpoint"`

	// TLSClientCert, if specified, references a kubernetes.io/tls type secret with 'tls.crt' and
	// 'tls.key' entries containing an optional TLS client certificate and key to be used when
	// checking endpoints that require a client certificate. The secret must exist in the same
	// namespace as this resource. (netpulse's checker makes plain TCP connects and does not
	// use it.)
	// +optional
	TLSClientCert SecretNameReference `json:"tlsClientCert,omitempty"`
}

// SecretNameReference references a secret in the same namespace (OpenShift config/v1).
type SecretNameReference struct {
	// name is the metadata.name of the referenced secret
	// +required
	Name string `json:"name"`
}

// PodNetworkConnectivityCheckStatus is the observed status.
type PodNetworkConnectivityCheckStatus struct {
	// successes contains logs successful check actions
	// +optional
	Successes []LogEntry `json:"successes,omitempty"`

	// failures contains logs of unsuccessful check actions
	// +optional
	Failures []LogEntry `json:"failures,omitempty"`

	// outages contains logs of time periods of outages
	// +optional
	Outages []OutageEntry `json:"outages,omitempty"`

	// conditions summarize the status of the check
	// +patchMergeKey=type
	// +patchStrategy=merge
	// +optional
	Conditions []PodNetworkConnectivityCheckCondition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// LogEntry records events
type LogEntry struct {
	// Start time of check action.
	// +required
	// +nullable
	Start metav1.Time `json:"time"`

	// success indicates if the log entry indicates a success or failure.
	// +required
	Success bool `json:"success"`

	// reason for status in a machine readable format.
	// +optional
	Reason string `json:"reason,omitempty"`

	// message explaining status in a human readable format.
	// +optional
	Message string `json:"message,omitempty"`

	// latency records how long the action mentioned in the entry took.
	// +optional
	// +nullable
	Latency metav1.Duration `json:"latency,omitempty"`
}

// OutageEntry records time period of an outage
type OutageEntry struct {
	// start of outage detected
	// +required
	// +nullable
	Start metav1.Time `json:"start"`

	// end of outage detected
	// +optional
	// +nullable
	End metav1.Time `json:"end,omitempty"`

	// startLogs contains log entries related to the start of this outage. Should contain
	// the original failure, any entries where the failure mode changed.
	// +optional
	StartLogs []LogEntry `json:"startLogs,omitempty"`

	// endLogs contains log entries related to the end of this outage. Should contain the success
	// entry that resolved the outage and possibly a few of the failure log entries that preceded it.
	// +optional
	EndLogs []LogEntry `json:"endLogs,omitempty"`

	// message summarizes outage details in a human readable format.
	// +optional
	Message string `json:"message,omitempty"`
}

// PodNetworkConnectivityCheckCondition represents the overall status of the pod network connectivity.
type PodNetworkConnectivityCheckCondition struct {
	// type of the condition
	// +required
	Type PodNetworkConnectivityCheckConditionType `json:"type"`

	// status of the condition
	// +required
	Status metav1.ConditionStatus `json:"status"`

	// reason for the condition's last status transition in a machine readable format.
	// +optional
	Reason string `json:"reason,omitempty"`

	// message indicating details about last transition in a human readable format.
	// +optional
	Message string `json:"message,omitempty"`

	// Last time the condition transitioned from one status to another.
	// +required
	// +nullable
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
}

// Log entry reasons, as OpenShift's.
const (
	LogEntryReasonDNSResolve      = "DNSResolve"
	LogEntryReasonDNSError        = "DNSError"
	LogEntryReasonTCPConnect      = "TCPConnect"
	LogEntryReasonTCPConnectError = "TCPConnectError"
)

// PodNetworkConnectivityCheckConditionType is a condition type.
type PodNetworkConnectivityCheckConditionType string

const (
	// Reachable indicates that the endpoint was reachable from the pod.
	Reachable PodNetworkConnectivityCheckConditionType = "Reachable"
)

// PodNetworkConnectivityCheckList is a collection of PodNetworkConnectivityCheck
//
// +kubebuilder:object:root=true
type PodNetworkConnectivityCheckList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard list's metadata.
	metav1.ListMeta `json:"metadata"`

	// items contains the items
	Items []PodNetworkConnectivityCheck `json:"items"`
}

// Group, version and names.
const (
	GroupName = "controlplane.operator.openshift.io"
	Version   = "v1alpha1"
	Kind      = "PodNetworkConnectivityCheck"
	Plural    = "podnetworkconnectivitychecks"
	CRDName   = Plural + "." + GroupName
)

var (
	// SchemeGroupVersion is the group and version of these types.
	SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}
	// GroupVersionResource is the group-version-resource of PodNetworkConnectivityCheck.
	GroupVersionResource = SchemeGroupVersion.WithResource(Plural)
	// SchemeBuilder registers the types.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &PodNetworkConnectivityCheck{}, &PodNetworkConnectivityCheckList{})
		metav1.AddToGroupVersion(s, SchemeGroupVersion)
		return nil
	})
	// AddToScheme adds the types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource is a resource of this group (the generated listers name it in their errors).
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}
