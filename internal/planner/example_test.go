// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package planner_test

import (
	"fmt"
	"time"

	"github.com/netpulse/netpulse/internal/planner"
)

func Example() {
	members := []planner.Member{
		{ID: "uid-a", Node: "node-1", Zone: "eu-1a"},
		{ID: "uid-b", Node: "node-2", Zone: "eu-1a"},
		{ID: "uid-c", Node: "node-3", Zone: "eu-1b"},
		{ID: "uid-d", Node: "node-4", Zone: "eu-1b"},
		{ID: "uid-e", Node: "node-5", Zone: "eu-1c"},
		{ID: "uid-f", Node: "node-6", Zone: "eu-1c"},
		{ID: "uid-g", Node: "node-7", Zone: "eu-1a"},
	}
	p, err := planner.New(members, planner.Config{K: 2, BaseInterval: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	fmt.Println("interval:", p.Interval(), "full coverage every", p.RoundsToFullCoverage(), "rounds")

	// Each agent fires once per round at round*Interval + Jitter(self).
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	round, at := p.NextProbe("uid-a", now)
	fmt.Println("uid-a fires at", at.UTC().Format(time.TimeOnly+".000"), "round", round)
	for r := round; r < round+3; r++ {
		var ids []string
		for _, m := range p.Targets("uid-a", r) {
			ids = append(ids, m.ID+"@"+m.Zone)
		}
		fmt.Println("round", r, "uid-a probes", ids, "uid-a is probed by", p.Observers("uid-a", r))
	}
	// Output:
	// interval: 10s full coverage every 3 rounds
	// uid-a fires at 12:00:08.274 round 176726880
	// round 176726880 uid-a probes [uid-g@eu-1a uid-b@eu-1a uid-c@eu-1b] uid-a is probed by [uid-e uid-f]
	// round 176726881 uid-a probes [uid-c@eu-1b uid-d@eu-1b] uid-a is probed by [uid-d uid-c]
	// round 176726882 uid-a probes [uid-f@eu-1c uid-e@eu-1c] uid-a is probed by [uid-b uid-g]
}
