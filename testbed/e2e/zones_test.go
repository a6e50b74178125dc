// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/v1alpha1"
)

// TestSampledZoneCut: the link between zone-a and zone-b fails (nft on every node drops
// the other zone's addresses, both ways); each zone still works inside, and zone-c is
// untouched. 16 agents in 3 zones, 4 of 15 peers a round. The gateway reports a zone pair, not nodes: a
// ZoneNetworkHealth per direction reads Unreachable with a ZoneConnectivityLost Event,
// the stable pairs that cross the zones read Unreachable and those inside a zone
// Reachable, and no node condition turns True at any time (without zone localisation a
// two-zone cut marks nodes: plan.TestZoneCutMarksNoNode). The sampled cluster has 3 zones
// (clusterSize). Healed, both objects read
// Reachable with a ZoneConnectivityRestored Event.
func TestSampledZoneCut(t *testing.T) {
	e := requireSampled(t)
	r := e.sampledHealthy(t, "baseline", time.Now(), convergeTimeout)
	zoneOf := map[string]string{}
	for _, n := range e.cl.Nodes() {
		zoneOf[n.Name] = n.Zone
	}
	t.Cleanup(func() {
		if err := e.cl.HealAll(); err != nil {
			t.Errorf("heal: %v", err)
		}
	})
	// Any node condition True while the zones are cut, or until they recover, is a flood.
	var marked sync.Map
	watchCtx, stopWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watchCtx.Err() == nil {
			if nodes, err := e.cl.Client.CoreV1().Nodes().List(watchCtx, metav1.ListOptions{}); err == nil {
				for i := range nodes.Items {
					if nodeCondition(&nodes.Items[i]) == corev1.ConditionTrue {
						marked.Store(nodes.Items[i].Name, true)
					}
				}
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()
	defer func() { stopWatch(); <-watched }()

	start := time.Now()
	if err := e.cl.CutZones("zone-a", "zone-b"); err != nil {
		t.Fatal(err)
	}
	// Only the pairs between zone-a and zone-b cross the cut (a third zone, if any, is
	// untouched).
	crossing := func(p pair) bool {
		zf, zt := zoneOf[p.from], zoneOf[p.to]
		return zf == "zone-a" && zt == "zone-b" || zf == "zone-b" && zt == "zone-a"
	}
	exp := e.expect("zone-cut", start).
		ring(r, pathExpect{reachable: false, ongoingOutage: true}, crossing).
		ring(r, pathExpect{reachable: true, stable: true}, func(p pair) bool { return !crossing(p) })
	exp.maxObjects = sampledBound(nodes)
	exp.nodeProblemOthers = true
	names := []string{v1alpha1.ZoneObjectName("zone-a", "zone-b"), v1alpha1.ZoneObjectName("zone-b", "zone-a")}
	d := e.awaitZones(t, "zone pair Unreachable", names, v1alpha1.Unreachable, v1alpha1.EventZoneConnectivityLost, start, detectTimeout)
	t.Logf("E2E zone cut: both zone pairs Unreachable %.1fs after the cut (%.1f probe intervals)", d.Seconds(), d.Seconds()/probeInterval.Seconds())
	e.await(t, "pairs", exp, detectTimeout)
	// Held a while: still no node marked.
	time.Sleep(10 * time.Second)
	e.await(t, "still cut", exp, detectTimeout)

	healed := time.Now()
	if err := e.cl.HealAll(); err != nil {
		t.Fatal(err)
	}
	d = e.awaitZones(t, "zone pair Reachable", names, v1alpha1.Reachable, v1alpha1.EventZoneConnectivityRestored, healed, recoverTimeout+nodeMinHold)
	t.Logf("E2E zone cut: both zone pairs Reachable %.1fs after the heal (zones.min_hold %v)", d.Seconds(), nodeMinHold)
	rec := e.expect("zone-cut", healed).ring(r, pathExpect{reachable: true}, nil)
	rec.maxObjects = sampledBound(nodes)
	rec.nodeProblemOthers = true
	e.await(t, "recover", rec, recoverTimeout)
	var flood []string
	marked.Range(func(k, _ any) bool { flood = append(flood, k.(string)); return true })
	slices.Sort(flood)
	if len(flood) > 0 {
		t.Errorf("node conditions turned True during the zone cut: %v", flood)
	}
}

// awaitZones waits until every named ZoneNetworkHealth reads want and carries an Event of
// reason since start; it returns how long that took.
func (e *env) awaitZones(t *testing.T, what string, names []string, want v1alpha1.Reachability, reason string, start time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var missing []string
		for _, name := range names {
			o, err := e.api.pnh.NetpulseV1alpha1().ZoneNetworkHealths().Get(ctx, name, metav1.GetOptions{})
			switch {
			case err != nil:
				missing = append(missing, name+": "+err.Error())
			case o.Status.Reachability != want:
				missing = append(missing, fmt.Sprintf("%s: %q", name, o.Status.Reachability))
			case !e.api.hasEventIn(ctx, corev1.NamespaceDefault, name, reason, start):
				missing = append(missing, name+": no "+reason+" Event")
			}
		}
		cancel()
		if len(missing) == 0 {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s\n%s", what, timeout, strings.Join(missing, "; "), e.cl.Logs(40))
		}
		time.Sleep(500 * time.Millisecond)
	}
}
