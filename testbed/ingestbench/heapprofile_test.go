// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package ingestbench

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
	"testing"
)

// inuseBytes is the in-use bytes of a heap profile (pprof's protobuf, gzipped as
// runtime/pprof writes it): the sum of its samples' inuse_space values, which
// runtime/pprof has already scaled for the sampling. After gc=1 it is the live heap as that
// GC's mark found it. MemStats.HeapAlloc, read when the profile is written, adds whatever
// the process allocated since: at 1,000 agents' rounds a second that is over 100 MB of
// garbage, while writing the profile takes a moment.
//
// A minimal reader of profile.proto (github.com/google/pprof/proto/profile.proto): fields
// 1 sample_type (ValueType: 1 type), 2 sample (Sample: 2 value), 6 string_table.
func inuseBytes(profile []byte) (float64, error) {
	zr, err := gzip.NewReader(bytes.NewReader(profile))
	if err != nil {
		return 0, err
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return 0, err
	}
	var types []int64    // sample_type's string indexes
	var values [][]int64 // each sample's values
	var strs []string
	err = protoFields(data, func(field int, wire int, v uint64, b []byte) error {
		switch {
		case field == 1 && wire == 2:
			return protoFields(b, func(f, w int, v uint64, _ []byte) error {
				if f == 1 && w == 0 {
					types = append(types, int64(v))
				}
				return nil
			})
		case field == 2 && wire == 2:
			var vals []int64
			err := protoFields(b, func(f, w int, v uint64, pb []byte) error {
				switch {
				case f == 2 && w == 0:
					vals = append(vals, int64(v))
				case f == 2 && w == 2: // packed
					for len(pb) > 0 {
						x, n := binary.Uvarint(pb)
						if n <= 0 {
							return errors.New("bad packed value")
						}
						vals, pb = append(vals, int64(x)), pb[n:]
					}
				}
				return nil
			})
			values = append(values, vals)
			return err
		case field == 6 && wire == 2:
			strs = append(strs, string(b))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	idx := -1
	for i, t := range types {
		if t >= 0 && int(t) < len(strs) && strs[t] == "inuse_space" {
			idx = i
		}
	}
	if idx < 0 {
		return 0, fmt.Errorf("no inuse_space among %d sample types", len(types))
	}
	var sum float64
	for _, v := range values {
		if idx < len(v) {
			sum += float64(v[idx])
		}
	}
	return sum, nil
}

// protoFields calls fn for each field of a protobuf message: varints as v, length-delimited
// fields as b; fixed-width fields are skipped.
func protoFields(data []byte, fn func(field, wire int, v uint64, b []byte) error) error {
	for len(data) > 0 {
		key, n := binary.Uvarint(data)
		if n <= 0 {
			return errors.New("bad field key")
		}
		data = data[n:]
		field, wire := int(key>>3), int(key&7)
		switch wire {
		case 0:
			v, n := binary.Uvarint(data)
			if n <= 0 {
				return errors.New("bad varint")
			}
			data = data[n:]
			if err := fn(field, wire, v, nil); err != nil {
				return err
			}
		case 1:
			if len(data) < 8 {
				return errors.New("short fixed64")
			}
			data = data[8:]
		case 2:
			l, n := binary.Uvarint(data)
			if n <= 0 || uint64(len(data)-n) < l {
				return errors.New("bad length")
			}
			b := data[n : n+int(l)]
			data = data[n+int(l):]
			if err := fn(field, wire, 0, b); err != nil {
				return err
			}
		case 5:
			if len(data) < 4 {
				return errors.New("short fixed32")
			}
			data = data[4:]
		default:
			return fmt.Errorf("wire type %d", wire)
		}
	}
	return nil
}

// inuseBytes reads this process's own heap profile: 64 MiB kept live are in it, and it is
// no more than the heap the runtime counts.
func TestInuseBytesOfAHeapProfile(t *testing.T) {
	live := make([]byte, 64<<20)
	for i := range live {
		live[i] = byte(i)
	}
	runtime.GC()
	var buf bytes.Buffer
	if err := pprof.Lookup("heap").WriteTo(&buf, 0); err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	got, err := inuseBytes(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if got < float64(len(live)) || got > float64(ms.HeapAlloc)*1.1 {
		t.Errorf("in-use bytes %.0f: want at least the %d kept live and at most ~HeapAlloc %d", got, len(live), ms.HeapAlloc)
	}
	runtime.KeepAlive(live)
}
