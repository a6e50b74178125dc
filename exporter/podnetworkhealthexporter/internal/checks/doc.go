// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package checks is the gateway's controller of declared checks (NetworkCheck, and
// OpenShift's PodNetworkConnectivityCheck with checks.openshift): it places each check on
// a vantage point, folds the results its vantage point reports into the check's status
// (internal/checkstatus: OpenShift's semantics) and writes that status, under the
// exporter's one write budget, when the write policy (internal/plan, CheckPolicy) says so.
//
// A pure core, tested by tables, decides; a thin edge reads and writes:
//
//   - core (book.go, place.go, status.go, result.go): the checks in memory and their
//     namespace quotas, which checks are due for placement, each placement decision from
//     what was read, folding one result into a check, what is due for a write (status,
//     labels, pruning) and each status as the API stores it. No I/O, no clients, no pdata,
//     no clock: callers pass `now`.
//   - edge (controller.go, resolve.go, logs.go): the generated typed informers and clients
//     of both kinds (api/client), the re-read at takeover, the pod and Service reads of a placement, decoding pod_probe's
//     log records, and the writes, which it hands to the exporter's writer through the
//     funcs in Deps.
//
// The controller knows nothing of the exporter: it is given its configuration, the
// enqueue func of the writer (charged to the budget), an Event emitter, the identity
// binding, a clock and the telemetry at construction, and its clients at Start.
package checks // import "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/checks"
