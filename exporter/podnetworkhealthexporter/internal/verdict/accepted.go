// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import (
	"time"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/observation"
)

// Usable reports whether Observe, at arrival time now, uses o rather than counting it
// ignored: a valid pair, a round time, not dated more than MaxFutureSkew after now. What
// else is fed the same observations (the view's live matrix) takes only these.
func (e *Engine) Usable(o *observation.Observation, now time.Time) bool {
	return usable(o, now.Add(e.cfg.MaxFutureSkew))
}

func usable(o *observation.Observation, future time.Time) bool {
	return observation.KeyOf(o).Valid() && !o.Timestamp.IsZero() && !o.Timestamp.After(future)
}
