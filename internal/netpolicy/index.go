// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package netpolicy

import (
	"maps"
	"slices"
	"strings"
	"sync"
)

// Index holds the policies by namespace and the namespaces' labels. Safe for concurrent
// use: evaluations share a read lock, updates take the write lock. Generation changes with
// every update, so a caller can skip evaluations whose inputs did not change.
type Index struct {
	mu         sync.RWMutex
	byNS       map[string][]*Policy // each namespace's policies, by name
	nsLabels   map[string]map[string]string
	generation uint64
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{byNS: map[string][]*Policy{}, nsLabels: map[string]map[string]string{}}
}

// SetPolicy adds or replaces a policy (by namespace and name).
func (ix *Index) SetPolicy(p *Policy) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	list := ix.byNS[p.Namespace]
	i, found := slices.BinarySearchFunc(list, p.Name, func(q *Policy, name string) int { return strings.Compare(q.Name, name) })
	if found {
		list = slices.Clone(list) // evaluations hold no reference past the lock, but keep updates copy-on-write anyway
		list[i] = p
	} else {
		list = slices.Insert(slices.Clone(list), i, p)
	}
	ix.byNS[p.Namespace] = list
	ix.generation++
}

// DeletePolicy removes a policy.
func (ix *Index) DeletePolicy(r Ref) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	list := ix.byNS[r.Namespace]
	i, found := slices.BinarySearchFunc(list, r.Name, func(q *Policy, name string) int { return strings.Compare(q.Name, name) })
	if !found {
		return
	}
	list = slices.Delete(slices.Clone(list), i, i+1)
	if len(list) == 0 {
		delete(ix.byNS, r.Namespace)
	} else {
		ix.byNS[r.Namespace] = list
	}
	ix.generation++
}

// SetNamespace records a namespace's labels (copied).
func (ix *Index) SetNamespace(name string, lbls map[string]string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if old, ok := ix.nsLabels[name]; ok && maps.Equal(old, lbls) {
		return
	}
	c := maps.Clone(lbls)
	if c == nil {
		c = map[string]string{}
	}
	ix.nsLabels[name] = c
	ix.generation++
}

// DeleteNamespace forgets a namespace.
func (ix *Index) DeleteNamespace(name string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if _, ok := ix.nsLabels[name]; ok {
		delete(ix.nsLabels, name)
		ix.generation++
	}
}

// Generation changes with every update.
func (ix *Index) Generation() uint64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.generation
}

// Len is the number of policies and namespaces held.
func (ix *Index) Len() (policies, namespaces int) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for _, l := range ix.byNS {
		policies += len(l)
	}
	return policies, len(ix.nsLabels)
}

// Evaluate decides the path under the policies held now.
func (ix *Index) Evaluate(p Path) Decision {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.evaluate(p)
}
