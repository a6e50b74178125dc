// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/internal/contract"
)

func standbyAgent(i int) observation.Source {
	return observation.Source{Namespace: "netpulse", Name: fmt.Sprintf("agent-%d", i), UID: fmt.Sprintf("uid-agent-%d", i),
		Node: fmt.Sprintf("node-%d", i), IP: fmt.Sprintf("10.0.0.%d", i+1)}
}

// A standby (it never leads, so Judge never runs) that agents reach by pod IP keeps target
// states for agents' pods, nodes and declared targets only, at most
// StandbyTargetsPerIdentity each, and forgets everything TargetTTL after it was last
// observed. Before, one agent sending points about 5,000 pods of the index held 5,000
// target states more (and 100 for one external address on 100 ports), never freed.
func TestStandbyKeepsAgentsOnlyAndExpires(t *testing.T) {
	e := New(Config{})
	e.Standby()
	t0 := time.Unix(1_700_000_000, 0)
	const agents = 10
	now := t0
	// The honest agents: each probes the next agent's pod over both families, and its node.
	obs := obsHonest(agents, now)
	require.Zero(t, e.Observe(obs, now))
	// The first round makes a pod's states only once its agent is a known observer.
	require.Zero(t, e.Observe(obs, now), "a second delivery of the round")
	honest := e.Stats().Targets
	assert.Equal(t, 3*agents, honest, "each agent's pod over two families and its node")

	// One agent: 5,000 workload pods of the index, and agent pods and nodes on many ports.
	liar := standbyAgent(0)
	obs = obs[:0]
	for i := range 5000 {
		obs = append(obs, observation.Observation{Source: liar, Timestamp: now, Success: false, ProbeType: contract.ProbeTypeTCP,
			Target: observation.Target{Kind: observation.TargetPod, Namespace: "default", Name: fmt.Sprintf("web-%d", i), UID: fmt.Sprintf("uid-web-%d", i),
				Node: "node-1", Address: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), Port: 80}})
		peer := standbyAgent(i % agents)
		obs = append(obs, observation.Observation{Source: liar, Timestamp: now, Success: false, ProbeType: contract.ProbeTypeTCP,
			Target: observation.Target{Kind: observation.TargetPod, Namespace: peer.Namespace, Name: peer.Name, UID: peer.UID, Node: peer.Node, Address: peer.IP, Port: int64(1000 + i)}},
			observation.Observation{Source: liar, Timestamp: now, Success: false, ProbeType: contract.ProbeTypeTCP,
				Target: observation.Target{Kind: observation.TargetNode, Name: peer.Node, Node: peer.Node, Address: "192.168.0.1", Port: int64(1000 + i)}})
	}
	// And one external address on 100 ports.
	for i := range 100 {
		obs = append(obs, observation.Observation{Source: liar, Timestamp: now, Success: false, ProbeType: contract.ProbeTypeTCP,
			Target: observation.Target{Kind: observation.TargetExternal, Address: "192.0.2.10", Port: int64(1 + i)}})
	}
	e.Observe(obs, now)
	st := e.Stats()
	t.Logf("standby after the flood: %d target states (%d honest), %d observers, %d pairs", st.Targets, honest, st.Observers, st.Pairs)
	assert.Equal(t, honest+StandbyTargetsPerIdentity, st.Targets, "no workload pod; %d of the external address's ports", StandbyTargetsPerIdentity)

	// Everything is forgotten TargetTTL after it was last observed; the honest state, kept
	// fresh by the agents' rounds, stays.
	ttl := e.Config().TargetTTL
	for now.Sub(t0) <= ttl+time.Minute {
		now = now.Add(10 * time.Second)
		e.Observe(obsHonest(agents, now), now)
		e.ExpireStandby(now)
	}
	assert.Equal(t, honest, e.Stats().Targets, "only what the honest agents keep observing")
	now = now.Add(ttl + time.Second)
	e.ExpireStandby(now)
	st = e.Stats()
	assert.Zero(t, st.Targets)
	assert.Zero(t, st.Observers)
	assert.Zero(t, st.Pairs)
	assert.Zero(t, len(e.dirty), "pairs marked changed")
	assert.Zero(t, len(e.dirtyTargets), "targets marked changed")
	assert.Zero(t, len(e.standby.perIdentity))

	// Leading, the engine keeps what it is sent (its Judge expires it).
	e.Resume(nil, now)
	e.Observe(obs[:3], now)
	assert.Equal(t, 3, e.Stats().Targets)
	e.ExpireStandby(now.Add(2 * ttl))
	assert.Equal(t, 3, e.Stats().Targets, "ExpireStandby does nothing on the leader")
}

func obsHonest(agents int, now time.Time) []observation.Observation {
	var obs []observation.Observation
	for i := range agents {
		peer := standbyAgent((i + 1) % agents)
		for _, addr := range []string{peer.IP, "fd00::" + fmt.Sprint(i+1)} {
			obs = append(obs, observation.Observation{Source: standbyAgent(i), Timestamp: now, Stable: true, Success: true, ProbeType: contract.ProbeTypeICMP,
				Target: observation.Target{Kind: observation.TargetPod, Namespace: peer.Namespace, Name: peer.Name, UID: peer.UID, Node: peer.Node, Address: addr}})
		}
		obs = append(obs, observation.Observation{Source: standbyAgent(i), Timestamp: now, Success: true, ProbeType: contract.ProbeTypeICMP,
			Target: observation.Target{Kind: observation.TargetNode, Name: peer.Node, Node: peer.Node, Address: "192.168.0." + fmt.Sprint(i+1)}})
	}
	return obs
}
