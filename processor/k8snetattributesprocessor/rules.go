// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8snetattributesprocessor // import "github.com/netpulse/netpulse/processor/k8snetattributesprocessor"

import (
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/k8sindex"
)

// field is an identity field a rule may write.
type field uint8

const (
	fPodName field = iota
	fNamespace
	fPodUID
	fNodeName
	fWorkload // one slot per workload kind; the slot's kind says which
	fZone
	fRegion
	fLabel // slot.label says which configured label
)

// slot is one key a rule knows: written when enabled and missing; the identity keys
// (pod name, UID, namespace, node name) are also checked when present, enabled or not.
type slot struct {
	key     string
	field   field
	kind    k8sindex.WorkloadKind // fWorkload
	label   int                   // fLabel
	enabled bool
	check   bool // a present value that differs from the identity's is a conflict
}

// rule is a compiled RuleConfig: every key it knows, prefixed once at start.
type rule struct {
	source    source
	attribute string
	prefix    string
	slots     []slot // at most maxSlots (Validate caps pod_labels)
}

// maxSlots bounds a rule's keys so that presence fits in a bit set.
const maxSlots = 64

func compileRule(rc RuleConfig, attrs []string, labelKeys []string) *rule {
	r := &rule{source: sourceOf(rc.From), attribute: rc.Attribute, prefix: rc.Prefix}
	add := func(s slot, name string) {
		s.key = rc.Prefix + name
		s.enabled = slices.Contains(attrs, name)
		r.slots = append(r.slots, s)
	}
	add(slot{field: fPodName, check: true}, contract.K8sPodName)
	add(slot{field: fNamespace, check: true}, contract.K8sNamespaceName)
	add(slot{field: fPodUID, check: true}, contract.K8sPodUID)
	add(slot{field: fNodeName, check: true}, contract.K8sNodeName)
	for k := k8sindex.WorkloadDeployment; k <= k8sindex.WorkloadCronJob; k++ {
		add(slot{field: fWorkload, kind: k}, k.AttributeKey())
	}
	add(slot{field: fZone}, contract.CloudZone)
	add(slot{field: fRegion}, contract.CloudRegion)
	for i, l := range labelKeys {
		if len(r.slots) == maxSlots {
			break // unreachable: Validate caps pod_labels at maxPodLabels
		}
		r.slots = append(r.slots, slot{key: rc.Prefix + "k8s.pod.label." + l, field: fLabel, label: i, enabled: true})
	}
	return r
}

// value is the identity's value for s ("" when it has none).
func (s *slot) value(id *k8sindex.Identity) string {
	switch s.field {
	case fPodName:
		return id.PodName
	case fNamespace:
		return id.Namespace
	case fPodUID:
		return id.PodUID
	case fNodeName:
		return id.NodeName
	case fWorkload:
		if id.Workload.Kind == s.kind {
			return id.Workload.Name
		}
	case fZone:
		return id.Zone
	case fRegion:
		return id.Region
	case fLabel:
		if s.label < len(id.Labels) {
			return id.Labels[s.label]
		}
	}
	return ""
}

// apply writes id under the rule's prefix into attrs, never overwriting. It returns false
// (and writes nothing) when attrs already names a different pod or node under the prefix,
// so that one element never carries two identities.
func (r *rule) apply(attrs pcommon.Map, id *k8sindex.Identity) bool {
	// One pass over the existing attributes finds the rule's keys that are present.
	var present uint64
	conflict := false
	attrs.Range(func(k string, v pcommon.Value) bool {
		if len(k) <= len(r.prefix) || k[:len(r.prefix)] != r.prefix {
			return true
		}
		for i := range r.slots {
			s := &r.slots[i]
			if s.key != k {
				continue
			}
			present |= 1 << i
			if s.check {
				want := s.value(id)
				if want != "" && !(v.Type() == pcommon.ValueTypeStr && v.Str() == want) {
					conflict = true
					return false
				}
			}
			break
		}
		return true
	})
	if conflict {
		return false
	}
	n := 0
	for i := range r.slots {
		if s := &r.slots[i]; s.enabled && present&(1<<i) == 0 && s.value(id) != "" {
			n++
		}
	}
	if n == 0 {
		return true
	}
	attrs.EnsureCapacity(attrs.Len() + n)
	for i := range r.slots {
		if s := &r.slots[i]; s.enabled && present&(1<<i) == 0 {
			if v := s.value(id); v != "" {
				attrs.PutStr(s.key, v)
			}
		}
	}
	return true
}
