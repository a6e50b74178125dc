// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package writequeue

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

const benchKeys = 10_000

func benchKeyNames() []string {
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = "pnh/netpulse/agent-" + strconv.Itoa(i) + ".agent-x-0123456789"
	}
	return keys
}

// BenchmarkQueue: 10,000 pending keys; one op is Pop + Done + Set of the popped key (with a
// rotating priority), so the queue stays at 10,000 keys.
func BenchmarkQueue(b *testing.B) { benchQueue(b, New[int](MaxItems(2*benchKeys)), time.Microsecond) }

// BenchmarkQueueFair is BenchmarkQueue with the verdict lane shared fairly among 1,000
// sources of 10 keys each (a 1,000-node cluster), each within a share of 1 write a second
// (burst 16), as the writer runs it; one op per 200 ms of the queue's clock (the budget's
// pace), so the shares hold nothing back and the cost measured is the lane's own.
func BenchmarkQueueFair(b *testing.B) {
	group := func(key string, _ int) string {
		n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(key, "pnh/netpulse/agent-"), ".agent-x-0123456789"))
		return strconv.Itoa(n / 10)
	}
	benchQueue(b, New[int](MaxItems(2*benchKeys), Fair(group, NewShare(1, 16))), 200*time.Millisecond)
}

func benchQueue(b *testing.B, q *Queue[int], step time.Duration) {
	keys := benchKeyNames()
	now := t0
	for i, k := range keys {
		q.Set(k, Priority(i%NumPriorities), i, now)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now = now.Add(step)
		k, _, v, ok := q.Pop(now)
		if !ok {
			b.Fatal("empty")
		}
		q.Done(k)
		q.Set(k, Priority(i%NumPriorities), v+1, now)
	}
}

// BenchmarkClientGoWorkqueue is the reference: client-go's FIFO work queue (what the writer
// used before) with the same 10,000 keys; one op is Get + Done + Add. It has no priorities
// and keeps no values, and it locks internally (the writer locks around the Queue).
func BenchmarkClientGoWorkqueue(b *testing.B) {
	keys := benchKeyNames()
	q := workqueue.NewTyped[string]()
	defer q.ShutDown()
	for _, k := range keys {
		q.Add(k)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k, quit := q.Get()
		if quit {
			b.Fatal("shut down")
		}
		q.Done(k)
		q.Add(k)
	}
}

// TestBenchQueueVsWorkqueue prints the BENCH line (opt-in: NETPULSE_BENCH=1):
//
//	NETPULSE_BENCH=1 go test -run TestBenchQueueVsWorkqueue -v ./exporter/podnetworkhealthexporter/internal/writequeue/
func TestBenchQueueVsWorkqueue(t *testing.T) {
	if os.Getenv("NETPULSE_BENCH") != "1" {
		t.Skip("opt-in benchmark: set NETPULSE_BENCH=1")
	}
	ours := testing.Benchmark(BenchmarkQueue)
	ref := testing.Benchmark(BenchmarkClientGoWorkqueue)
	o, r := float64(ours.T.Nanoseconds())/float64(ours.N), float64(ref.T.Nanoseconds())/float64(ref.N)
	fmt.Printf("BENCH writequeue_set_pop_ns ours=%.0fns/op reference=%.0fns/op ratio=%.2fx\n", o, r, r/o)
	t.Logf("allocs/op: ours %d (%d B/op), reference %d (%d B/op)", ours.AllocsPerOp(), ours.AllocedBytesPerOp(), ref.AllocsPerOp(), ref.AllocedBytesPerOp())
}
