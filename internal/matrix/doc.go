// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package matrix turns what the pod_network_health exporter writes — PodNetworkHealth
// objects and the nodes' netpulse condition — into the pictures netpulse's web view and
// kubectl plugin show: a node x node connectivity matrix (rows: observer nodes, columns:
// target nodes, grouped by zone), a zone x zone summary for large clusters, a per-pair
// drill-down, a per-target explanation ("why") and the worst pairs ("top").
//
// It is pure: no I/O, no clock (the caller passes now), no Kubernetes client. Callers
// feed it objects from informers (the web view) or from one LIST (the plugin).
//
// netpulse samples: at N nodes only about (M+1)·N stable pairs plus the failing pairs
// have objects, so the matrix is sparse. A cell without an object is "not probed / no
// object" (Verdict None), never healthy.
package matrix
