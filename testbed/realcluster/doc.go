// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package realcluster runs a local Kubernetes cluster of real nodes for netpulse's
// real-node tests and demo: the project's control plane (testbed/kubetest: etcd,
// kube-apiserver, kube-controller-manager with every default controller) plus the real
// kube-scheduler on the host, and N nodes, each a network namespace on the simulated
// cluster's bridge (testbed/simcluster's address plan and host lock) running its own
// containerd (with Debian's runc), a real kubelet and a real kube-proxy (nftables mode).
// Pods get their addresses from the CNI bridge and host-local plugins (IPv4 and IPv6) and
// reach other nodes' pods through routes between the nodes; cluster DNS is CoreDNS, run as
// the Kubernetes DNS addon runs it (a Deployment behind the kube-dns Service). With
// Options.NetworkPolicy each node also runs SIG Network's kube-network-policies, which
// enforces NetworkPolicies (the bridge plugin does not). Everything is built here from source
// (Makefile target node-bins: tools/kube, tools/node, tools/coredns, tools/netpol, Kubernetes'
// pause.c) and images are imported into each node's containerd: no registry.
//
// What differs from a machine per node, and why it does not matter to what is tested:
// the nodes share one kernel (one conntrack table limit, one set of kernel sysctls, which
// the kubelets set the same way), one mount namespace (each kubelet and containerd has
// its own root, state and cgroup root), and one cgroup v1 hierarchy (each kubelet's
// --cgroup-root is its own subtree, so the container limits are the kernel's own). One kubelet
// path is host-wide whatever the flags, the device-plugin registration socket: the kubelets
// start one after another and the last one holds it (no device plugin runs here).
//
// Everything needs root. See README.md.
package realcluster
