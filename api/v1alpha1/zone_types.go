/*
Copyright The netpulse Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ZoneNetworkHealth is the observed health of the pod network between two zones
// (topology.kubernetes.io/zone), in one direction: whether the observers in sourceZone
// reach the pods and nodes in targetZone while both zones work, and whether the link
// between them loses packets. The pod_network_health exporter writes one only for a zone
// pair it has found cut or lossy, and deletes it a retention time after the pair
// recovered: on a healthy cluster there are none. The objects are cluster-scoped, like the
// zones they name; the spec is immutable.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=zonenetworkhealths,singular=zonenetworkhealth,shortName=znh,categories=netpulse,scope=Cluster
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="From",type=string,JSONPath=`.spec.sourceZone`,description="Zone of the observers."
// +kubebuilder:printcolumn:name="To",type=string,JSONPath=`.spec.targetZone`,description="Zone of the targets."
// +kubebuilder:printcolumn:name="Reachable",type=string,JSONPath=`.status.reachability`,description="Unreachable while the zone pair is cut, Reachable after."
// +kubebuilder:printcolumn:name="Failing",type=integer,JSONPath=`.status.failingNodePairs`,description="Observer node to target node pairs that fail."
// +kubebuilder:printcolumn:name="Pairs",type=integer,JSONPath=`.status.nodePairs`,description="Observer node to target node pairs with a recent outcome."
// +kubebuilder:printcolumn:name="Since",type=date,JSONPath=`.status.conditions[?(@.type=="Reachable")].lastTransitionTime`,description="How long the current verdict has held."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ZoneNetworkHealth struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata. The name is chosen by the writer from the
	// zones (ZoneNetworkHealthName).
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the zone pair. It is immutable.
	// +required
	Spec ZoneNetworkHealthSpec `json:"spec"`

	// status is the observed health of the zone pair.
	// +optional
	Status ZoneNetworkHealthStatus `json:"status,omitempty"`
}

// ZoneNetworkHealthSpec names the ordered zone pair.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: a ZoneNetworkHealth describes one (source zone, target zone) pair"
// +kubebuilder:validation:XValidation:rule="self.sourceZone != self.targetZone",message="sourceZone and targetZone must differ"
type ZoneNetworkHealthSpec struct {
	// sourceZone is the zone of the observers (the value of their nodes'
	// topology.kubernetes.io/zone label).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	SourceZone string `json:"sourceZone"`

	// targetZone is the zone of the targets.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	TargetZone string `json:"targetZone"`
}

// ZoneNetworkHealthStatus is the zone pair's verdict as of lastObservedTime.
type ZoneNetworkHealthStatus struct {
	// reachability is Unreachable while the pair is cut (and for the hold time after the
	// last judgement that found it cut), Reachable after. It mirrors the Reachable condition.
	// +optional
	Reachability Reachability `json:"reachability,omitempty"`

	// nodePairs is the number of (observer node in sourceZone, target node in targetZone)
	// pairs with a recent outcome; failingNodePairs those of them that fail (a node pair
	// is reached when any pod on the target node, or the node itself, answers).
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodePairs int32 `json:"nodePairs,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	FailingNodePairs int32 `json:"failingNodePairs,omitempty"`

	// failingObserverNodes and failingTargetNodes name the distinct nodes of each side in
	// a failing node pair: at most 10 each, sorted; the counts are complete.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=253
	FailingObserverNodes []string `json:"failingObserverNodes,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	FailingObserverNodeCount int32 `json:"failingObserverNodeCount,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=253
	FailingTargetNodes []string `json:"failingTargetNodes,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	FailingTargetNodeCount int32 `json:"failingTargetNodeCount,omitempty"`

	// lastFailureTime is the newest judgement that found the pair cut: the hold time runs
	// from it, across a change of writer.
	// +optional
	LastFailureTime *metav1.Time `json:"lastFailureTime,omitempty"`

	// lastObservedTime is the time of the judgement this status was written from.
	// +optional
	LastObservedTime *metav1.Time `json:"lastObservedTime,omitempty"`

	// conditions: Reachable (False/ZonePairUnreachable while cut, True/ZonePairReachable
	// after) and, once the link has been judged lossy, Degraded (True/PacketLoss while the
	// gateway's gray judgement finds echoes between the zones lost, with the figures;
	// False/WithinThresholds after). Types and reasons at most 64 characters, messages at
	// most 256.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:XValidation:rule="self.all(c, size(c.type) <= 64)",message="condition types must be at most 64 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(c, size(c.reason) <= 64)",message="condition reasons must be at most 64 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(c, size(c.message) <= 256)",message="condition messages must be at most 256 characters"
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Reasons of a ZoneNetworkHealth's Reachable condition.
const (
	// ReasonZonePairUnreachable (Reachable=False): most node pairs from sourceZone to
	// targetZone fail, from at least two observer nodes towards at least two target nodes,
	// while both zones work inside.
	ReasonZonePairUnreachable = "ZonePairUnreachable"
	// ReasonZonePairReachable (Reachable=True): the pair is no longer cut.
	ReasonZonePairReachable = "ZonePairReachable"
	// MaxZoneNodesListed bounds failingObserverNodes and failingTargetNodes.
	MaxZoneNodesListed = 10
)

// ZoneNetworkHealthList is a list of ZoneNetworkHealth.
//
// +kubebuilder:object:root=true
type ZoneNetworkHealthList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ZoneNetworkHealth `json:"items"`
}
