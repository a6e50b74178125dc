#!/usr/bin/env bash
# pod_network_health write budget (simulated hours) vs the OpenShift connectivity-check model.
set -euo pipefail
go test -count=1 -run TestWriteBudget -v ./exporter/podnetworkhealthexporter/internal/plan/
