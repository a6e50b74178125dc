#!/usr/bin/env bash
# k8s_net_attributes vs contrib k8s_attributes on the same metrics and the same index
# (10,000 pods on 1,000 nodes loaded into the local control plane), and heap per pod.
set -euo pipefail
NETPULSE_BENCH=1 go test -count=1 -run TestBenchmarkAgainstK8sAttributes -v -timeout 30m ./processor/k8snetattributesprocessor/
NETPULSE_BENCH=1 go test -count=1 -run TestHeapPerPod -v ./internal/k8sindex/
