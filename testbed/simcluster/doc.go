// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package simcluster runs a simulated Kubernetes cluster for netpulse's end-to-end tests
// and demo: the project's real local control plane (testbed/kubetest) listening on the
// host side of a Linux bridge, N simulated nodes as network namespaces with a veth into
// the bridge, the deploy/ manifests applied through the API, one agent pod per node whose
// "kubelet" is this package (status, IPs, readiness), and the real otelcol-netpulse
// binary running deploy/agent-gateway/config/agent.yaml inside each node's namespace.
//
// Faults for the scenarios: Partition, Loss, Delay (nft and a userspace ICMP echo
// responder, since the kernel here has no tc netem), Heal, DeletePod, CreatePod,
// RollAgents and StopAPIServer/StartAPIServer. OTLPSink is a test stand-in for the gateway.
//
// The package does not import testing: the e2e tests use it through simclustertest, and a
// demo program can use it directly. Everything needs root. See README.md.
package simcluster
