// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package checkstatus is the pure core of declared point-to-point network checks (a
// source pod -> a target endpoint): it folds check results into a status with the
// semantics of OpenShift's PodNetworkConnectivityCheck. When that status is worth a write
// to the Kubernetes API is the gateway's write policy (the pod_network_health exporter's
// internal/plan, CheckPolicy). It does no I/O, starts no goroutines, never reads
// the clock (callers pass `now`) and knows nothing of Kubernetes clients or OpenTelemetry.
//
// # Inputs
//
// A checker runs each check every interval (DefaultInterval, at least MinInterval) and
// reports one Entry per run: time, success, reason (the Reason* constants), message and
// latency. A single writer (the gateway) keeps one Status per check in memory, feeds the
// results to Apply, emits the Events it returns, and writes the status when its write
// policy says so.
//
// # Status semantics
//
// Rewritten here from the published API documentation of OpenShift's
// PodNetworkConnectivityCheck (controlplane.operator.openshift.io/v1alpha1); no OpenShift
// code is used.
//
//   - Successes and Failures are logs of results, newest first, at most MaxLogEntries each.
//   - Outages is the outage history, newest first, at most MaxOutages (the oldest dropped).
//     An outage starts at the first failure after a success (or the first failure ever):
//     Start is that failure's time, StartLogs holds that failure, and the message is
//     "Connectivity outage detected at <start, RFC 3339 with nanoseconds>". While it is
//     ongoing (End is zero), a failure whose reason differs from the newest StartLogs
//     entry's (the failure mode changed) is added to StartLogs while there is room
//     (MaxOutageLogs; the first ones are kept). The next success ends it: End is that
//     success's time, EndLogs holds the success and then up to MaxOutageLogs-1 of the
//     outage's most recent failures, newest first, and the message becomes "Connectivity
//     restored after <duration rounded to a second>".
//   - The Reachable condition follows the newest result: True after a success, False after a
//     failure, with reasons chosen by the Flavour (see ConditionReason) and the result's
//     message. Its LastTransitionTime changes only when its status changes. Silence turns
//     it Unknown (ReasonNoResults) when no result arrived for a while.
//   - An outage's start emits a Warning event ConnectivityOutageDetected ("Connectivity
//     outage detected: <failure message>"), its end a Normal event ConnectivityRestored
//     ("Connectivity restored: <success message>").
//   - Messages are cut to MaxMessageLength characters and reasons to MaxReasonLength
//     characters (runes, never inside a multi-byte character), the limits of a Kubernetes
//     condition.
//
// Apply accepts results in any order and more than once: it sorts them by time and ignores
// every result not newer than the status's LastResultTime, so replays after a restart or a
// retried batch change nothing. It never aliases its input: the returned status owns all
// of its slices.
//
// Pruning (OpenShift removes checks whose source is gone) and the write policy are the
// gateway's decisions, not the status's semantics: see the exporter's internal/plan.
package checkstatus // import "github.com/netpulse/netpulse/internal/checkstatus"
