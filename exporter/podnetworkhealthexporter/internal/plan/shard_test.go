// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
	"github.com/netpulse/netpulse/internal/shard"
)

// ownedBy keeps the observations of the targets whose node shard index owns of count, as
// the agents' filters route them (and the gateway's ownership check keeps them).
func ownedBy(obs []observation.Observation, index, count int) []observation.Observation {
	var out []observation.Observation
	for _, o := range obs {
		if shard.Of(o.Target.Node, count) == index {
			out = append(out, o)
		}
	}
	return out
}

// heartbeats: every source of obs, at its newest round (what every shard receives).
func heartbeats(r *ring, round int, except string) []observation.Heartbeat {
	var out []observation.Heartbeat
	for i := 0; i < r.n; i++ {
		if s := r.src(i); s.Name != except {
			out = append(out, observation.Heartbeat{Source: s, At: r.at(round).Add(time.Duration(i) * time.Millisecond)})
		}
	}
	return out
}

// A shard hears an agent only in rounds in which one of the agent's targets is its own. With
// the agents' heartbeat no healthy observer ever reads silent on any shard and no object says
// ObserverSilent; without it (the control) observers read silent on a shard that merely
// owned none of their targets for a few rounds. An agent that really stops (no heartbeat)
// reads silent on every shard, and its objects say so.
func TestShardsJudgeSilenceByHeartbeat(t *testing.T) {
	const count, mute = 3, "agent-5"
	r := newRing(24, 3)
	rounds := int((2*verdict.DefaultTargetTTL)/r.iv) + 10
	run := func(index int, withHeartbeats bool, muteFrom int) (silentNames map[string]int, objects map[observation.PairKey]ObjectWrite) {
		e := New(verdict.Config{})
		silentNames = map[string]int{}
		objects = map[observation.PairKey]ObjectWrite{}
		for round := range rounds {
			obs := r.round(round, healthy)
			except := ""
			if muteFrom >= 0 && round >= muteFrom {
				obs, except = withoutSource(obs, mute), mute
			}
			now := r.at(round)
			e.Observe(ownedBy(obs, index, count), now)
			if withHeartbeats {
				require.Zero(t, e.Heard(heartbeats(r, round, except), now))
			}
			res := e.Reconcile(now.Add(time.Second))
			for _, c := range res.ObserverChanges {
				if c.Silent {
					silentNames[c.Name]++
				}
			}
			for _, w := range res.Objects {
				if w.Delete {
					delete(objects, w.Key)
				} else {
					objects[w.Key] = w
				}
			}
		}
		return silentNames, objects
	}
	falseSilences := 0
	for index := range count {
		silent, objects := run(index, true, -1)
		assert.Empty(t, silent, "shard %d: no healthy observer reads silent", index)
		require.NotEmpty(t, objects, "shard %d owns stable pairs", index)
		for k, w := range objects {
			assert.Empty(t, w.SilentObserver, "shard %d: %s", index, k)
			assert.Equal(t, index, shard.Of(fmt.Sprintf("node-%s", k.TargetName[len("agent-"):]), count), "only its own targets")
		}
		control, _ := run(index, false, -1)
		falseSilences += len(control)

		silent, objects = run(index, true, 20)
		assert.Equal(t, map[string]int{mute: 1}, silent, "shard %d: the stopped agent, once", index)
		for k, w := range objects {
			if k.SourcePod == mute {
				assert.Equal(t, "netpulse/"+mute, w.SilentObserver, "shard %d: %s", index, k)
			}
		}
	}
	assert.Positive(t, falseSilences, "the control: without heartbeats a shard misreads observers as silent")
}
