// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podprobereceiver

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/icmpengine"
)

// A round whose echoes all went out and none came back is a timeout, whatever error
// wrapped it: real nodes recorded a partition's outages with reason Error.
func TestICMPObservationErrorType(t *testing.T) {
	all := icmpengine.Result{Sent: 3, Lost: 3}
	for _, c := range []struct {
		name string
		res  icmpengine.Result
		err  error
		want string
	}{
		{"no error", all, nil, contract.ErrorTypeTimeout},
		{"round deadline", all, fmt.Errorf("round: %w", context.DeadlineExceeded), contract.ErrorTypeTimeout},
		{"unclassified, all echoes lost", all, errors.New("no reply"), contract.ErrorTypeTimeout},
		{"unclassified, nothing sent", icmpengine.Result{}, errors.New("socket closed"), contract.ErrorTypeOther},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := icmpObservation(target{}, time.Now(), c.res, c.err)
			assert.False(t, o.success)
			assert.Equal(t, c.want, o.errorType)
		})
	}
}
