// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package k8sindex is netpulse's lean, process-wide index of Kubernetes pods and nodes by
// IP address. It answers one question fast and without I/O — "whose address is this?" —
// for the k8s_net_attributes processor and any other component of the same process.
//
// The package has three layers:
//
//   - the lookup core (Index): compact entries, interned strings, netip.Addr keys, IP-reuse
//     and deleted-pod grace rules; pure and synchronous, fed with PodRecord / NodeRecord
//     values, so it is unit-testable and benchmarkable without an API server;
//   - the decoders (PodRecordFromPod, NodeRecordFromNode): the only place that sees
//     corev1 objects; everything not listed in PodRecord is dropped before caching;
//   - the watcher (Watch) and the registry (Acquire): one reflector per resource type,
//     list+watch only (resync 0), feeding the core through its own cache.Store
//     implementation, so no *corev1.Pod is ever kept in an informer store; the registry
//     shares one watcher and index between all components with the same key.
package k8sindex

import (
	"net/netip"
	"time"

	"github.com/netpulse/netpulse/internal/contract"
)

// Kind is what an address resolved to.
type Kind uint8

const (
	// KindNone: the address is not in the index.
	KindNone Kind = iota
	// KindPod: a pod IP (not host-network).
	KindPod
	// KindNode: a node address, or the IP of a host-network pod (which is its node's IP).
	KindNode
)

func (k Kind) String() string {
	switch k {
	case KindPod:
		return "pod"
	case KindNode:
		return "node"
	default:
		return "none"
	}
}

// WorkloadKind is the kind of the workload that owns a pod.
type WorkloadKind uint8

const (
	WorkloadNone WorkloadKind = iota
	WorkloadDeployment
	// WorkloadReplicaSet is a ReplicaSet not created by a Deployment.
	WorkloadReplicaSet
	WorkloadStatefulSet
	WorkloadDaemonSet
	// WorkloadJob is a Job not created by a CronJob.
	WorkloadJob
	WorkloadCronJob
)

func (w WorkloadKind) String() string {
	switch w {
	case WorkloadDeployment:
		return "Deployment"
	case WorkloadReplicaSet:
		return "ReplicaSet"
	case WorkloadStatefulSet:
		return "StatefulSet"
	case WorkloadDaemonSet:
		return "DaemonSet"
	case WorkloadJob:
		return "Job"
	case WorkloadCronJob:
		return "CronJob"
	default:
		return ""
	}
}

// AttributeKey is the OpenTelemetry attribute that carries the workload's name
// (k8s.deployment.name, ...), or "" for WorkloadNone.
func (w WorkloadKind) AttributeKey() string {
	switch w {
	case WorkloadDeployment:
		return contract.K8sDeploymentName
	case WorkloadReplicaSet:
		return contract.K8sReplicaSetName
	case WorkloadStatefulSet:
		return contract.K8sStatefulSetName
	case WorkloadDaemonSet:
		return contract.K8sDaemonSetName
	case WorkloadJob:
		return contract.K8sJobName
	case WorkloadCronJob:
		return contract.K8sCronJobName
	default:
		return ""
	}
}

// Workload is the top-level controller of a pod.
type Workload struct {
	Kind WorkloadKind
	Name string
}

// Phase is a pod's lifecycle phase.
type Phase uint8

const (
	PhaseUnknown Phase = iota
	PhasePending
	PhaseRunning
	PhaseSucceeded
	PhaseFailed
)

func (p Phase) String() string {
	switch p {
	case PhasePending:
		return "Pending"
	case PhaseRunning:
		return "Running"
	case PhaseSucceeded:
		return "Succeeded"
	case PhaseFailed:
		return "Failed"
	default:
		return "Unknown"
	}
}

// Terminal reports whether the pod's containers have all stopped for good; the kubelet
// releases the IPs of terminal pods, so they no longer own them.
func (p Phase) Terminal() bool { return p == PhaseSucceeded || p == PhaseFailed }

// Identity is what an address resolves to. For KindNode only NodeName, Zone and Region
// are set. Strings are shared with the index: never modify Labels.
type Identity struct {
	Kind      Kind
	PodName   string
	PodUID    string
	Namespace string
	NodeName  string
	Workload  Workload
	Zone      string
	Region    string
	Phase     Phase
	Ready     bool
	// Deleted is set when the address belongs to a pod deleted less than the index's
	// deleted-pod grace ago and no live pod holds it now.
	Deleted bool
	// Terminating: the pod's deletionTimestamp is set.
	Terminating bool
	// Labels are the values of the index's configured pod labels (Index.LabelKeys), ""
	// when the pod does not have the label; nil when no labels are configured.
	Labels []string
	// NodeCordoned: the node (the pod's, or the node itself) is unschedulable
	// (spec.unschedulable: cordoned, usually for a drain). NodeNotReady: its Ready condition
	// is not True (the kubelet stopped reporting, or reports a problem).
	NodeCordoned, NodeNotReady bool
}

// PodRecord is everything the index keeps about a pod; PodRecordFromPod builds it from a
// corev1.Pod.
type PodRecord struct {
	UID       string
	Name      string
	Namespace string
	NodeName  string
	// IPs are status.podIPs (primary first).
	IPs         []netip.Addr
	HostNetwork bool
	Phase       Phase
	Ready       bool
	// Terminating: metadata.deletionTimestamp is set.
	Terminating bool
	Created     time.Time
	Workload    Workload
	// Labels are the values of the configured label keys, aligned with them.
	Labels []string
}

// OwnsIPs reports whether the pod's IPs identify it: it has IPs, it is not on the host
// network (its IP is the node's) and it is not terminal (its IPs were released).
func (r *PodRecord) OwnsIPs() bool {
	return len(r.IPs) > 0 && !r.HostNetwork && !r.Phase.Terminal()
}

// NodeRecord is everything the index keeps about a node.
type NodeRecord struct {
	Name   string
	Zone   string
	Region string
	// IPs are the node's InternalIP and ExternalIP addresses.
	IPs []netip.Addr
	// Cordoned is spec.unschedulable; NotReady: the Ready condition is present and not True.
	Cordoned, NotReady bool
}
