// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"time"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/apply"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/plan"
)

// DesiredOf is the object the exporter writes for one of the plan's object writes
// (desiredOf): the scale simulation (internal/scalesim) hands the real writer exactly
// what the exporter would.
func DesiredOf(w plan.ObjectWrite, now time.Time) *apply.Desired { return desiredOf(w, now) }

// PairEventReference is the object an Event about a pair's verdict change refers to.
func PairEventReference(ev plan.Event) (ns, name string) {
	return ev.Key.SourceNamespace, nameOf(ev.Key)
}

// PersistedOf is what a new leader reads back from an object (persistedOf): the scale
// simulation's failover resumes a fresh engine from the fake API with it.
func PersistedOf(o *v1alpha1.PodNetworkHealth) verdict.Persisted { return persistedOf(o) }

// KeyOfObject is the pair an object is about (keyOfObject): the simulation tells the engine
// of objects the garbage collector removed, as the exporter's informer handler does.
func KeyOfObject(o *v1alpha1.PodNetworkHealth) observation.PairKey { return keyOfObject(o) }
