// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package netpolicy evaluates Kubernetes NetworkPolicies (networking.k8s.io/v1) for one
// path — a source pod, a destination pod or address, a port and a protocol — so that a
// failing declared check can say which policy denies it instead of reading as a bare
// timeout.
//
// It is pure: no I/O, no client-go. Index holds the policies (compiled by Compile from the
// API objects) and the namespaces' labels; a watcher elsewhere feeds it. Evaluate answers
// Allowed, Denied (with the policies that isolate the pod on the denying side and admit
// nothing for this path) or Unknown (something the answer depends on is not known: a
// destination that is no known pod, a namespace not in the index, a named port without
// the destination's container ports). Denied is only said when it is certain under the
// API's semantics; everything implementation-defined (ipBlock matched against pod
// addresses, host-network pods, traffic rewritten by NAT) is read in favour of Allowed or
// Unknown.
//
// Not evaluated: AdminNetworkPolicy and BaselineAdminNetworkPolicy
// (policy.networking.k8s.io), and the CNIs' own kinds (Calico's and Cilium's policies).
// A path that one of those denies reads Allowed or Unknown here.
package netpolicy // import "github.com/netpulse/netpulse/internal/netpolicy"
