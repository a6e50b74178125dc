// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package observation

import "encoding/binary"

// PackCounts packs a Histogram's bucket counts as uvarints: one byte per count below 128,
// two below 16,384. The gateway keeps a histogram per stable pair's stream (the decoder's
// cumulative baseline) and per slot of a pair's window; most of their counts are small,
// and packed they take a few bytes per bucket instead of eight (plus append slack). nil
// for no counts.
func PackCounts(counts []uint64) []byte {
	if len(counts) == 0 {
		return nil
	}
	n := 0
	for _, c := range counts {
		n++
		for c >= 0x80 {
			c >>= 7
			n++
		}
	}
	b := make([]byte, 0, n)
	for _, c := range counts {
		b = binary.AppendUvarint(b, c)
	}
	return b
}

// UnpackCounts appends the counts PackCounts packed to into.
func UnpackCounts(b []byte, into []uint64) []uint64 {
	for len(b) > 0 {
		c, k := binary.Uvarint(b)
		if k <= 0 { // unreachable for PackCounts' output
			break
		}
		into, b = append(into, c), b[k:]
	}
	return into
}
