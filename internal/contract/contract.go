// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package contract names the telemetry the three netpulse components exchange: the
// pod_probe receiver emits it, k8s_net_attributes enriches it, pod_network_health reads it.
// Keeping the keys in one place is what lets one pipeline test prove the components agree.
// docs/telemetry-contract.md explains each key.
//
// The closed lists of values (ProbeTypes, TargetKinds, NetworkTypes, ErrorTypes,
// PathMTUStatuses, Disruptions, GatewayCheckReasons; Enums for the attributes) are defined here once: the
// components and the API derive their own from them, and the copies that must stay literal
// (pod_probe's metadata.yaml, the API's kubebuilder enum markers and the CRDs generated from
// them) have tests that fail when they differ.
package contract

import "slices"

// Source of a probe: the probing pod, on the Resource (standard OpenTelemetry k8s keys).
const (
	K8sPodName       = "k8s.pod.name"
	K8sPodUID        = "k8s.pod.uid"
	K8sPodIP         = "k8s.pod.ip"
	K8sNamespaceName = "k8s.namespace.name"
	K8sNodeName      = "k8s.node.name"
)

// Target of a probe, on data point (and span) attributes.
const (
	DestinationAddress = "destination.address"
	DestinationPort    = "destination.port"
	// NetworkType is one of the NetworkType* values (NetworkTypes).
	NetworkType = "network.type"
	// ProbeType is one of the ProbeType* values (ProbeTypes).
	ProbeType = "netpulse.probe.type"
	// ErrorType is a low-cardinality failure class (the ErrorType* values); absent on success.
	ErrorType = "error.type"
	// TargetKind says what the address belongs to: one of the TargetKind* values
	// (TargetKinds).
	TargetKind = "netpulse.target.kind"
	// PairStable is true on the points of a pair the source probes every round (its
	// stable peers and its static targets) and absent on rotating peers. Only stable pairs
	// (and failing ones) get PodNetworkHealth objects and per-pair series at the gateway;
	// rotating pairs feed the per-target verdicts. See docs/telemetry-contract.md.
	PairStable = "netpulse.pair.stable"
	// TargetEndpoint tells targets on one address and port apart: the URL of a static
	// http(s) target, the question of a DNS probe ("<name> <type>"); absent otherwise.
	TargetEndpoint = "netpulse.target.endpoint"
	// PathMTUStatus is the outcome of a path-MTU probe (MetricPathMTU): the PathMTU* values.
	PathMTUStatus = "netpulse.path_mtu.status"
)

// Path-MTU probe outcomes (PathMTUStatus values).
const (
	PathMTUOK                  = "ok"
	PathMTUBlackHole           = "black_hole"
	PathMTUFragmentationNeeded = "fragmentation_needed"
)

// PathMTUStatuses is every PathMTUStatus value.
var PathMTUStatuses = [...]string{PathMTUOK, PathMTUBlackHole, PathMTUFragmentationNeeded}

// Network types (NetworkType values): the probed address's family. pod_probe's
// address_families setting uses the same words.
const (
	NetworkTypeIPv4 = "ipv4"
	NetworkTypeIPv6 = "ipv6"
)

// NetworkTypes is every NetworkType value.
var NetworkTypes = [...]string{NetworkTypeIPv4, NetworkTypeIPv6}

// Target kinds (TargetKind values), as the receiver knows the address: a peer pod, a
// peer's node (its host network) or an external / static endpoint. The PodNetworkHealth
// API names the same three kinds capitalised (api/v1alpha1 TargetKind: Pod, Node,
// External), as the gateway resolves the address.
const (
	TargetKindPod      = "pod"
	TargetKindNode     = "node"
	TargetKindExternal = "external"
)

// TargetKinds is every TargetKind value.
var TargetKinds = [...]string{TargetKindPod, TargetKindNode, TargetKindExternal}

// Probe types (ProbeType values). The PodNetworkHealth API's probe types
// (api/v1alpha1 ProbeType) are the same values.
const (
	ProbeTypeICMP = "icmp"
	ProbeTypeTCP  = "tcp"
	ProbeTypeHTTP = "http"
	ProbeTypeDNS  = "dns"
)

// ProbeTypes is every ProbeType value, in the order a PodNetworkHealth status lists its
// probe results (ICMP first: the pair's RTT is ICMP's when it has one). Adding a type
// here adds it everywhere the list is derived (the gateway's admission, the exporter's
// per-type state, the live matrix); the tests of the literal copies (pod_probe's
// metadata.yaml, the API's enum markers and CRDs) then fail until those are updated.
var ProbeTypes = [...]string{ProbeTypeICMP, ProbeTypeTCP, ProbeTypeHTTP, ProbeTypeDNS}

// AddressProbeTypes are the probe types run against an address or a URL: pod_probe's
// peers, selectors and static targets, and declared checks (NetworkCheck spec.probe).
// DNS is a question asked of a server, configured apart (pod_probe's dns list).
var AddressProbeTypes = [...]string{ProbeTypeICMP, ProbeTypeTCP, ProbeTypeHTTP}

// Error types (error.type values).
const (
	ErrorTypeTimeout     = "timeout"
	ErrorTypeRefused     = "refused"
	ErrorTypeUnreachable = "unreachable"
	ErrorTypeDNS         = "dns_error"
	ErrorTypeTLS         = "tls_error"
	ErrorTypeHTTPStatus  = "http_status"
	ErrorTypePermission  = "permission"
	ErrorTypeOther       = "other"
)

// ErrorTypes is every error.type value: what one target can have error streams for.
var ErrorTypes = [...]string{ErrorTypeTimeout, ErrorTypeRefused, ErrorTypeUnreachable, ErrorTypeDNS,
	ErrorTypeTLS, ErrorTypeHTTPStatus, ErrorTypePermission, ErrorTypeOther}

// DestinationPrefix is where k8s_net_attributes writes the target's identity: the standard
// key under this prefix, e.g. destination.k8s.pod.name.
const DestinationPrefix = "destination."

// Identity keys the processor writes (under DestinationPrefix for the target, bare for the
// source when the Resource lacks them).
const (
	K8sDeploymentName  = "k8s.deployment.name"
	K8sDaemonSetName   = "k8s.daemonset.name"
	K8sStatefulSetName = "k8s.statefulset.name"
	K8sReplicaSetName  = "k8s.replicaset.name"
	K8sJobName         = "k8s.job.name"
	K8sCronJobName     = "k8s.cronjob.name"
	CloudZone          = "cloud.availability_zone"
	CloudRegion        = "cloud.region"
)

// DestinationPodLeaving (bool, true when set) is written by k8s_net_attributes on the
// gateway when the destination pod is terminating (deletionTimestamp set) or was deleted
// within the index's deleted-pod grace: probes that fail while a pod goes away (a roll, a
// drain) say nothing about its node. The processor removes any value a sender put there.
const DestinationPodLeaving = DestinationPrefix + "k8s.pod.leaving"

// DestinationDisruption (string) is written by k8s_net_attributes on the gateway when the
// destination is known to be going away or down for a reason the cluster itself reports,
// so that failures towards it blame no network: one of the Disruption* values, the first
// that applies in their order. The processor removes any value a sender put there.
const DestinationDisruption = DestinationPrefix + "netpulse.disruption"

// Disruption values (DestinationDisruption), in precedence order.
const (
	// DisruptionPodTerminating: the destination pod has a deletionTimestamp or was deleted.
	DisruptionPodTerminating = "PodTerminating"
	// DisruptionNodeNotReady: the destination's node reports Ready not True.
	DisruptionNodeNotReady = "NodeNotReady"
	// DisruptionNodeDraining: the destination's node is cordoned (spec.unschedulable).
	DisruptionNodeDraining = "NodeDraining"
	// DisruptionNotReady: the destination pod is Pending (not yet started). A Running pod
	// that is not Ready is not excused: netpulse's own readiness gate makes pods NotReady,
	// and excusing them would hide the failures that keep them so.
	DisruptionNotReady = "NotReady"
)

// Disruptions is every DestinationDisruption value, in precedence order. The
// PodNetworkHealth API writes each as a reason of the Reachable condition (api/v1alpha1
// Reason*, the same words).
var Disruptions = [...]string{DisruptionPodTerminating, DisruptionNodeNotReady, DisruptionNodeDraining, DisruptionNotReady}

// Metric names emitted by pod_probe (documented by its generated documentation.md).
const (
	MetricStatus      = "netpulse.probe.status"       // gauge 1/0 per target and probe type
	MetricDuration    = "netpulse.probe.duration"     // exponential histogram, seconds (RTT for ICMP)
	MetricPacketsSent = "netpulse.probe.packets.sent" // sum, ICMP echoes sent
	MetricPacketsLost = "netpulse.probe.packets.lost" // sum, ICMP echoes lost
	MetricLossRatio   = "netpulse.probe.loss.ratio"   // gauge 0-1 per round
	MetricJitter      = "netpulse.probe.icmp.jitter"  // gauge, seconds per round (>= 2 replies)
	MetricErrors      = "netpulse.probe.errors"       // sum by error.type
	MetricPathMTU     = "netpulse.probe.path_mtu"     // gauge, bytes known to pass (path-MTU probes, opt-in)
	// MetricRounds: sum, the probe rounds an agent published since it started, one point a
	// round without data point attributes. Sent only to sharded gateways (pod_probe's
	// shards > 1): the heartbeat every shard receives (internal/shard).
	MetricRounds = "netpulse.probe.rounds"
)

// ProbeScopeName is the instrumentation scope of the metrics above: pod_probe's (its
// tests check the two agree).
const ProbeScopeName = "github.com/netpulse/netpulse/receiver/podprobereceiver"

// Declared checks (NetworkCheck, PodNetworkConnectivityCheck): pod_probe emits one log
// record per run of a check (event name CheckResultEvent, scope ProbeScopeName), with the
// reporter's identity on the Resource (the agent or sidecar pod, as for metrics), the
// message as the body, the run's start as the timestamp, and these attributes plus
// DestinationAddress, DestinationPort, ProbeType and SourceAddress. pod_network_health
// folds them into the check's status. See docs/checks.md.
const (
	CheckResultEvent = "netpulse.check.result"
	// CheckKind is "NetworkCheck" or "PodNetworkConnectivityCheck".
	CheckKind      = "netpulse.check.kind"
	CheckNamespace = "netpulse.check.namespace"
	CheckName      = "netpulse.check.name"
	CheckUID       = "netpulse.check.uid"
	// CheckSuccess is a bool.
	CheckSuccess = "netpulse.check.success"
	// CheckReason is the run's reason (TCPConnect, TCPConnectError, DNSError, ...).
	CheckReason = "netpulse.check.reason"
	// CheckLatency is the run's probe duration in seconds (double).
	CheckLatency = "netpulse.check.latency"
	// CheckEndpoint is what the run probed: host:port, the URL, or the address.
	CheckEndpoint = "netpulse.check.endpoint"
	// SourceAddress is the local address the probe left from.
	SourceAddress = "source.address"
)

// Reasons of a declared check's Reachable condition that only the gateway gives, from
// what it holds itself; never a result's reason (CheckReason). The gateway refuses a result
// that carries one (check_invalid), so no agent or sidecar can claim them.
const (
	// CheckReasonNetworkPolicyDenied: the check fails and the NetworkPolicies in the
	// gateway's index deny its path (docs/checks.md).
	CheckReasonNetworkPolicyDenied = "NetworkPolicyDenied"
)

// GatewayCheckReasons is every reason only the gateway gives.
var GatewayCheckReasons = [...]string{CheckReasonNetworkPolicyDenied}

// Enums returns the closed data point attributes of pod_probe's metrics with their
// values: what the gateway's admission accepts, and what pod_probe's metadata.yaml must
// declare (its tests compare them). A fresh map each call.
func Enums() map[string][]string {
	return map[string][]string{
		NetworkType:   slices.Clone(NetworkTypes[:]),
		ProbeType:     slices.Clone(ProbeTypes[:]),
		TargetKind:    slices.Clone(TargetKinds[:]),
		ErrorType:     slices.Clone(ErrorTypes[:]),
		PathMTUStatus: slices.Clone(PathMTUStatuses[:]),
	}
}
