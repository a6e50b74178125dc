// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package observation

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPackCountsRoundTrip(t *testing.T) {
	for _, counts := range [][]uint64{
		nil,
		{0},
		{1, 0, 127, 128, 16383, 16384, 1 << 40, math.MaxUint64},
	} {
		b := PackCounts(counts)
		assert.Len(t, b, cap(b), "packed exactly")
		got := UnpackCounts(b, nil)
		if len(counts) == 0 {
			assert.Nil(t, b)
			assert.Empty(t, got)
			continue
		}
		assert.Equal(t, counts, got)
		assert.Equal(t, append([]uint64{7}, counts...), UnpackCounts(b, []uint64{7}), "appends")
	}
	assert.Len(t, PackCounts([]uint64{0, 1, 127}), 3, "one byte per count below 128")
}
