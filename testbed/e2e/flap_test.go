// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/testbed/simcluster"
)

// countEvents counts the Events of reason about object since.
func (a *apiChecker) countEvents(ctx context.Context, object, reason string, since time.Time) (int, error) {
	evs, err := a.core.CoreV1().Events(simcluster.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + object + ",reason=" + reason})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ev := range evs.Items {
		if !ev.LastTimestamp.Time.Before(since.Truncate(time.Second)) {
			n += int(max(ev.Count, 1))
		}
	}
	return n, nil
}

// TestFlappingLink: with flap_window 30s (the gateway restarted with NETPULSE_FLAP_WINDOW),
// node-3's link flaps 10 s down / 10 s up four times. Each pair towards node-3 records one
// outage that folds the flapping period in (outages[0].flaps counts the re-failures), one
// outage Event, the restore of the first recovery and one ConnectivityFlapping Event - not
// an outage and a restore per cycle (4 + 4 without the window). Healed for longer than the
// window, the outage ends with a second restore Event. The gateway is
// then restarted with the window off again (the mesh's other scenarios expect a fresh
// outage per fault).
func TestFlappingLink(t *testing.T) {
	e := requireMesh(t)
	const node = "node-3"
	e.requireHealthy(t)
	e.healOnCleanup(t, node)
	e.gwEnv["NETPULSE_FLAP_WINDOW"] = "30s"
	e.takeover(t, false)
	t.Cleanup(func() {
		e.gwEnv["NETPULSE_FLAP_WINDOW"] = "0s"
		e.takeover(t, false)
	})
	e.requireHealthy(t)
	ctx := context.Background()

	start := time.Now()
	const cycles = 4
	for i := range cycles {
		if err := e.cl.Partition(node); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		if err := e.cl.Heal(node); err != nil {
			t.Fatal(err)
		}
		if i < cycles-1 {
			time.Sleep(10 * time.Second)
		}
	}
	healed := time.Now()
	t.Logf("E2E flapping: %d cycles of 10 s down / 10 s up on %s in %.0fs", cycles, node, healed.Sub(start).Seconds())
	rec := e.healthy("flapping", healed, pathExpect{})
	rec.nodeProblem[node] = false // held for min_hold after the last cycle, then cleared
	rec.nodeProblemOthers = true
	e.await(t, "recover", rec, 30*time.Second+recoverTimeout)

	objs, err := e.api.objects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	agents := e.cl.Agents()
	checked := 0
	for _, src := range agents {
		for _, dst := range agents {
			if dst.Node != node || src.Node == node {
				continue
			}
			name := objectName(src, dst)
			o := objs[name]
			if o == nil {
				t.Errorf("%s: no object", name)
				continue
			}
			var outages []v1alpha1.Outage
			for _, out := range o.Status.Outages {
				if !out.Start.Time.Before(start.Add(-time.Second)) {
					outages = append(outages, out)
				}
			}
			if len(outages) != 1 {
				t.Errorf("%s: %d outages since the flapping began, want 1 (folded): %s", name, len(outages), outageStarts(o.Status.Outages))
				continue
			}
			if outages[0].End == nil || outages[0].Flaps < 2 {
				t.Errorf("%s: outage %s, %d flaps; want it ended, with the re-failures counted (>= 2)", name, outageStarts(outages), outages[0].Flaps)
			}
			// Events queue behind the status writes: the last restore may follow the
			// object's recovery by a few seconds.
			counts := map[string]int{}
			for deadline := time.Now().Add(20 * time.Second); ; {
				for _, reason := range []string{v1alpha1.EventOutageDetected, v1alpha1.EventFlapping, v1alpha1.EventRestored} {
					if counts[reason], err = e.api.countEvents(ctx, name, reason, start); err != nil {
						t.Fatal(err)
					}
				}
				if counts[v1alpha1.EventRestored] >= 2 || time.Now().After(deadline) {
					break
				}
				time.Sleep(time.Second)
			}
			// The first recovery is a real one when it happens (nothing says yet that the link
			// flaps): its restore Event stands; the re-failure reopens that outage with the
			// flapping Event, and the end of the flapping period restores it again.
			if counts[v1alpha1.EventOutageDetected] != 1 || counts[v1alpha1.EventFlapping] != 1 || counts[v1alpha1.EventRestored] != 2 {
				t.Errorf("%s: Events %v; want one outage, one flapping, two restored (the first recovery, the end)", name, counts)
			}
			t.Logf("E2E flapping %s: 1 outage, %d flaps, Events %v", name, outages[0].Flaps, counts)
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no pair towards the flapping node checked")
	}
}
