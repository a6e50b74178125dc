// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8sindex

import (
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Legacy topology labels, still set by some providers.
const (
	legacyZoneLabel   = "failure-domain.beta.kubernetes.io/zone"
	legacyRegionLabel = "failure-domain.beta.kubernetes.io/region"
)

// PodRecordFromPod extracts what the index keeps from a pod; labelKeys are the labels to
// keep (values aligned with the keys, "" when absent). The record shares strings with
// the pod; the index copies what it keeps.
func PodRecordFromPod(p *corev1.Pod, labelKeys []string) PodRecord {
	r := PodRecord{
		UID:         string(p.UID),
		Name:        p.Name,
		Namespace:   p.Namespace,
		NodeName:    p.Spec.NodeName,
		HostNetwork: p.Spec.HostNetwork,
		Phase:       phaseOf(p.Status.Phase),
		Terminating: p.DeletionTimestamp != nil,
		Created:     p.CreationTimestamp.Time,
		Workload:    WorkloadOf(p),
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			r.Ready = c.Status == corev1.ConditionTrue
			break
		}
	}
	switch {
	case len(p.Status.PodIPs) > 0:
		r.IPs = make([]netip.Addr, 0, len(p.Status.PodIPs))
		for _, ip := range p.Status.PodIPs {
			if a, err := netip.ParseAddr(ip.IP); err == nil {
				r.IPs = append(r.IPs, canonical(a))
			}
		}
	case p.Status.PodIP != "":
		if a, err := netip.ParseAddr(p.Status.PodIP); err == nil {
			r.IPs = []netip.Addr{canonical(a)}
		}
	}
	if len(labelKeys) > 0 {
		r.Labels = make([]string, len(labelKeys))
		for i, k := range labelKeys {
			r.Labels[i] = p.Labels[k]
		}
	}
	return r
}

func phaseOf(p corev1.PodPhase) Phase {
	switch p {
	case corev1.PodPending:
		return PhasePending
	case corev1.PodRunning:
		return PhaseRunning
	case corev1.PodSucceeded:
		return PhaseSucceeded
	case corev1.PodFailed:
		return PhaseFailed
	default:
		return PhaseUnknown
	}
}

// NodeRecordFromNode extracts what the index keeps from a node: its name, topology
// labels and InternalIP / ExternalIP addresses.
func NodeRecordFromNode(n *corev1.Node) NodeRecord {
	r := NodeRecord{
		Name:     n.Name,
		Zone:     n.Labels[corev1.LabelTopologyZone],
		Region:   n.Labels[corev1.LabelTopologyRegion],
		Cordoned: n.Spec.Unschedulable,
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			r.NotReady = c.Status != corev1.ConditionTrue
			break
		}
	}
	if r.Zone == "" {
		r.Zone = n.Labels[legacyZoneLabel]
	}
	if r.Region == "" {
		r.Region = n.Labels[legacyRegionLabel]
	}
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			r.IPs = append(r.IPs, canonical(ip))
		}
	}
	return r
}

// WorkloadOf derives the workload that owns a pod from its controller owner reference
// (without reading the owner):
//   - ReplicaSet: the Deployment named by stripping the pod-template-hash suffix (the
//     pod's pod-template-hash label, or a suffix that looks like one); a ReplicaSet
//     whose name has no such suffix is reported as a ReplicaSet;
//   - Job: the CronJob named by stripping the scheduled-time suffix ("-" and at least 8
//     digits, the CronJob controller's naming), else the Job;
//   - StatefulSet, DaemonSet: as is; anything else (a bare pod, a static pod owned by its
//     Node, a custom controller): WorkloadNone.
func WorkloadOf(p *corev1.Pod) Workload {
	ref := controllerRef(p.OwnerReferences)
	if ref == nil {
		return Workload{}
	}
	switch ref.Kind {
	case "ReplicaSet":
		if d, ok := deploymentOf(ref.Name, p.Labels["pod-template-hash"]); ok {
			return Workload{Kind: WorkloadDeployment, Name: d}
		}
		return Workload{Kind: WorkloadReplicaSet, Name: ref.Name}
	case "StatefulSet":
		return Workload{Kind: WorkloadStatefulSet, Name: ref.Name}
	case "DaemonSet":
		return Workload{Kind: WorkloadDaemonSet, Name: ref.Name}
	case "Job":
		if c, ok := cronJobOf(ref.Name); ok {
			return Workload{Kind: WorkloadCronJob, Name: c}
		}
		return Workload{Kind: WorkloadJob, Name: ref.Name}
	default:
		return Workload{}
	}
}

func controllerRef(refs []metav1.OwnerReference) *metav1.OwnerReference {
	for i := range refs {
		if refs[i].Controller != nil && *refs[i].Controller {
			return &refs[i]
		}
	}
	if len(refs) == 1 {
		return &refs[0]
	}
	return nil
}

// deploymentOf strips the pod-template-hash suffix from a ReplicaSet name.
func deploymentOf(rs, hash string) (string, bool) {
	if hash != "" {
		if d, ok := strings.CutSuffix(rs, "-"+hash); ok && d != "" {
			return d, true
		}
		return "", false
	}
	// No label (rare: pods created by other tooling): accept a suffix shaped like the
	// hash Deployments generate (rand.SafeEncodeString alphabet, 6-10 characters).
	i := strings.LastIndexByte(rs, '-')
	if i <= 0 {
		return "", false
	}
	suffix := rs[i+1:]
	if len(suffix) < 6 || len(suffix) > 10 {
		return "", false
	}
	for j := 0; j < len(suffix); j++ {
		if !strings.ContainsRune("bcdfghjklmnpqrstvwxz2456789", rune(suffix[j])) {
			return "", false
		}
	}
	return rs[:i], true
}

// cronJobOf strips the scheduled-time suffix the CronJob controller appends to Job names.
func cronJobOf(job string) (string, bool) {
	i := strings.LastIndexByte(job, '-')
	if i <= 0 || len(job)-i-1 < 8 {
		return "", false
	}
	for j := i + 1; j < len(job); j++ {
		if job[j] < '0' || job[j] > '9' {
			return "", false
		}
	}
	return job[:i], true
}
