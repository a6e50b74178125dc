/*
Copyright The netpulse Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NetworkHealthSummary is one gateway writer's account of what it judges: how many
// targets, how many of them are Unreachable or Degraded (and on which nodes), how many
// observers report, and whether everything it decided is in the API yet. The
// pod_network_health exporter writes one per Lease it leads (one per gateway shard), in
// the Lease's namespace and under the Lease's name, and rewrites it only when one of
// those figures changes: it is current while that Lease is renewed (its renewTime is
// recent) and held by status.writer, not because it was rewritten recently. On a
// 65,000-node cluster it is the one object that says, within seconds of a cold start,
// what the shard has found, while the shard's first writes of healthy pairs drain at the
// write budget for hours.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=networkhealthsummaries,singular=networkhealthsummary,shortName=nhsum,categories=netpulse,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Targets",type=integer,JSONPath=`.status.targets`,description="Targets the writer judges."
// +kubebuilder:printcolumn:name="Unreachable",type=integer,JSONPath=`.status.unreachableTargets`,description="Targets judged Unreachable."
// +kubebuilder:printcolumn:name="Degraded",type=integer,JSONPath=`.status.degradedTargets`,description="Targets judged lossy or slow (PacketLoss, HighLatency)."
// +kubebuilder:printcolumn:name="Observers",type=integer,JSONPath=`.status.observers`,description="Observers reporting."
// +kubebuilder:printcolumn:name="Complete",type=string,JSONPath=`.status.conditions[?(@.type=="Complete")].status`,description="True once every verdict the writer reached is written."
// +kubebuilder:printcolumn:name="Writer",type=string,JSONPath=`.status.writer`,priority=1,description="The Lease holder that wrote this status."
// +kubebuilder:printcolumn:name="Judged",type=date,JSONPath=`.status.lastJudgedTime`,description="The judgement this status was written from."
type NetworkHealthSummary struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata. The name is the writer's Lease's.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// status is the writer's summary.
	// +optional
	Status NetworkHealthSummaryStatus `json:"status,omitempty"`
}

// NetworkHealthSummaryStatus is the writer's summary as of lastJudgedTime.
type NetworkHealthSummaryStatus struct {
	// leaseName is the writer's coordination.k8s.io Lease, in this object's namespace. This
	// status, and every object the writer keeps, is current while that Lease is renewed by
	// writer; a reader checks the Lease's renewTime and holderIdentity instead of the
	// objects' age.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	LeaseName string `json:"leaseName,omitempty"`

	// writer is the Lease holder (the gateway pod) that wrote this status.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Writer string `json:"writer,omitempty"`

	// shard and shards: this writer judges the targets on the nodes of shard `shard` of
	// `shards` (0 of 1 without shards).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Shard int32 `json:"shard,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	Shards int32 `json:"shards,omitempty"`

	// termStartTime is when the writer's leadership term began: it judges from
	// observations it received since.
	// +optional
	TermStartTime *metav1.Time `json:"termStartTime,omitempty"`

	// lastJudgedTime is the judgement this status was written from. The status is
	// rewritten only when a figure below changes, so on a stable cluster this is old while
	// the status is current (see leaseName).
	// +optional
	LastJudgedTime *metav1.Time `json:"lastJudgedTime,omitempty"`

	// targets is the number of targets (agent pods, nodes, external endpoints, per address
	// family) the writer judges; reachableTargets, unreachableTargets and unknownTargets
	// split them by verdict (Unknown: not judged yet, or failing for an expected reason such
	// as a drain).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Targets int32 `json:"targets,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReachableTargets int32 `json:"reachableTargets,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	UnreachableTargets int32 `json:"unreachableTargets,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	UnknownTargets int32 `json:"unknownTargets,omitempty"`

	// degradedTargets is the number of targets judged lossy (PacketLoss) or slow
	// (HighLatency) by the gray judgement.
	// +optional
	// +kubebuilder:validation:Minimum=0
	DegradedTargets int32 `json:"degradedTargets,omitempty"`

	// unreachableNodes and degradedNodes name the distinct nodes of the Unreachable and
	// Degraded targets: at most 10 each, sorted; unreachableNodeCount and
	// degradedNodeCount are complete.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=253
	UnreachableNodes []string `json:"unreachableNodes,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	UnreachableNodeCount int32 `json:"unreachableNodeCount,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=253
	DegradedNodes []string `json:"degradedNodes,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	DegradedNodeCount int32 `json:"degradedNodeCount,omitempty"`

	// observers is the number of observers (agents) the writer hears from; silentObservers
	// those of them that stopped reporting.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Observers int32 `json:"observers,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	SilentObservers int32 `json:"silentObservers,omitempty"`

	// pendingVerdictWrites is the number of verdict writes (a pair's changed verdict, a node
	// or pod condition) queued when this status was judged; pendingWrites every write
	// queued (first writes of healthy pairs, figures, heartbeats, deletes included), which
	// the write budget drains.
	// +optional
	// +kubebuilder:validation:Minimum=0
	PendingVerdictWrites int32 `json:"pendingVerdictWrites,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	PendingWrites int32 `json:"pendingWrites,omitempty"`

	// conditions: Complete (True/VerdictsWritten once every verdict write the term queued
	// is made; False/WarmingUp while the term is younger than its targets need to be
	// judged; False/VerdictWritesPending while verdict writes wait for the write budget).
	// Types and reasons at most 64 characters, messages at most 256.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:XValidation:rule="self.all(c, size(c.type) <= 64)",message="condition types must be at most 64 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(c, size(c.reason) <= 64)",message="condition reasons must be at most 64 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(c, size(c.message) <= 256)",message="condition messages must be at most 256 characters"
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// The Complete condition of a NetworkHealthSummary and its reasons.
const (
	// ConditionComplete: every verdict the writer reached this term is in the API.
	ConditionComplete = "Complete"
	// ReasonVerdictsWritten (Complete=True): no verdict write is queued.
	ReasonVerdictsWritten = "VerdictsWritten"
	// ReasonVerdictWritesPending (Complete=False): verdict writes wait for the budget.
	ReasonVerdictWritesPending = "VerdictWritesPending"
	// ReasonWarmingUp (Complete=False): the term is younger than the time its targets need
	// to be judged (their observers' rounds since it began).
	ReasonWarmingUp = "WarmingUp"
	// MaxSummaryNodesListed bounds unreachableNodes and degradedNodes.
	MaxSummaryNodesListed = 10
)

// NetworkHealthSummaryList is a list of NetworkHealthSummary.
//
// +kubebuilder:object:root=true
type NetworkHealthSummaryList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NetworkHealthSummary `json:"items"`
}
