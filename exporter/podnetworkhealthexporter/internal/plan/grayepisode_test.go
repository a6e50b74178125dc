// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/verdict"
)

// A gray verdict that comes back within the flap window of its end is the episode that
// ended: the object says Degraded again, with no second ConnectivityDegraded Event (on
// real nodes a window that had not judged a loss was set on its echoes 5 s after the
// pair's verdict cleared). Past the window, or with the window off, it is a new episode.
func TestAGrayVerdictBackWithinTheFlapWindowIsOneEpisode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window time.Duration
		back   time.Duration // from the clear to the verdict's return
		events int           // ConnectivityDegraded Events in all
	}{
		{"back after 5s", time.Minute, 5 * time.Second, 1},
		{"back after the window", time.Minute, 61 * time.Second, 2},
		{"window off", 0, 5 * time.Second, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := time.Unix(1_700_000_000, 0)
			s := observation.Summary{Key: simKey, Verdict: observation.VerdictReachable, LastObserved: at}
			st := verdict.PairState{Key: simKey, Summary: s, Stable: true, HasObject: true,
				Last: verdict.ObjectRecord{Written: observation.WrittenFrom(s, at)}}
			c := PairObjects{Policy: Policy{FlapWindow: tc.window}}
			lossy := verdict.PairGray{Reason: DegradedPacketLoss, Side: verdict.SideTarget, Node: "node-1"}
			events := 0
			step := func(now time.Time, g verdict.PairGray) ObjectWrite {
				t.Helper()
				st.Summary.LastObserved, st.Gray = now, g
				w, ok := c.planPair(st, now, c.Policy)
				require.True(t, ok, "a change of the Degraded condition is written")
				st.Last = w.record
				events += len(degradedEvents([]ObjectWrite{w}))
				return w
			}
			step(at.Add(10*time.Second), lossy)
			require.Equal(t, 1, events, "the episode's Event")
			cleared := at.Add(2 * time.Minute)
			w := step(cleared, verdict.PairGray{})
			require.Empty(t, w.Gray.Reason)
			if tc.window > 0 {
				require.Equal(t, cleared, w.record.GrayEnded, "the end is kept while a return would be the same episode")
			} else {
				require.True(t, w.record.GrayEnded.IsZero(), "nothing kept with the window off")
			}
			w = step(cleared.Add(tc.back), lossy)
			require.Equal(t, DegradedPacketLoss, w.Gray.Reason, "the object says Degraded again either way")
			require.Equal(t, tc.events, events)

			// Cleared and back once more, long after: a new episode in every case.
			later := cleared.Add(10 * time.Minute)
			step(later, verdict.PairGray{})
			step(later.Add(2*time.Minute), lossy)
			require.Equal(t, tc.events+1, events)
		})
	}
}
