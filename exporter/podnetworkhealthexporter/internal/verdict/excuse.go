// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package verdict

import "time"

// DisruptionExcuseFor bounds how long a disruption the cluster reported excuses new
// failures (targetState.excused): a run of failures that began more than this after the
// disruption began is the network's, not the disruption's. Without it a node cordoned for
// days hid every new partition of its pods. Ten minutes cover what a disruption is followed
// by: a drain's evictions (each evicted pod then reports its own PodTerminating, which
// starts a new disruption: the clock restarts when the kind changes), a pod's termination
// grace, the node controller's eviction of a NotReady node's pods after 5 minutes.
const DisruptionExcuseFor = 10 * time.Minute

// excuseExpired reports whether a disruption that began at since is too old to excuse
// failures that began at firstFail.
func excuseExpired(since, firstFail time.Time) bool {
	return firstFail.Sub(since) > DisruptionExcuseFor
}
