// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package agentbench measures what one netpulse agent costs per node in memory: the
// otelcol-netpulse binary (the distribution ocb generates, built from cmd/otelcol-netpulse)
// run as a host process with the shipped agent configuration
// (deploy/agent-gateway/config/agent.yaml, its DaemonSet's GOMEMLIMIT and memory limit),
// authenticated as the agent's ServiceAccount under deploy/rbac, against a real
// kube-apiserver that holds a cluster of N Nodes (status as kubelets write it: conditions,
// addresses, images) with one agent Pod each and other workload Pods, exporting over TLS
// with its bearer token to a small OTLP/gRPC sink in the test process. What an agent
// watches grows with the cluster (its peers and the Nodes), so the run measures at
// several sizes, growing one control plane (NETPULSE_AGENTBENCH_NODES, default 30,1000).
//
// The reference, measured in the same run and at the same time, is the same binary with a
// minimal configuration: an idle OTLP receiver into the same otlp_grpc exporter (TLS,
// bearer token, the same sink) and the same internal telemetry, no pod_probe: the floor
// of any otelcol-netpulse process.
//
// Each collector runs in a memory cgroup (v1) of its own with the DaemonSet's memory
// limit, so that the figures include what the kubelet reports for a container (working
// set: usage less inactive file pages, and the peak), next to the process's own view
// (/proc/<pid>/status VmRSS, split into anonymous and file-backed pages, and the largest
// anonymous memory since the start, sampled every 50 ms) and the Go runtime's (live heap
// after a forced GC and the runtime's total, from the pprof extension's heap profile,
// which is also saved and summarised with `go tool pprof -top`).
//
// Each collector runs its own copy of the binary, dropped from the page cache, so that the
// pages it reads are charged to its cgroup, as on a node whose cache no longer holds the
// image: under the limit the kernel then keeps the binary's hot pages only (and fills the
// rest of the limit with its file cache, which the working set counts as active).
// NETPULSE_AGENTBENCH_CACHED=1 runs the built binary, cached and charged elsewhere instead:
// the first start after the image was unpacked, where the working set is the anonymous
// memory and VmRSS counts every cached page of the binary the process maps.
//
// The agent probes its peers for real: their Pod IPs are loopback addresses, so the
// harness adds allow_loopback: true and, since this host's net.ipv4.ping_group_range lets
// no group open unprivileged ICMP sockets, icmp.mode: privileged (the test runs as root);
// the pods set the sysctl. Both only change how the echoes are sent, not what is kept.
//
// Run it with `make bench` or NETPULSE_BENCH=1 go test -run TestAgentBench -v ./testbed/agentbench/.
package agentbench
