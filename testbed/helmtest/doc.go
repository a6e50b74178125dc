// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package helmtest tests the Helm chart deploy/helm/netpulse with the pinned bin/helm
// (`make helm`): lint, template, the values schema, the same objects as
// `kubectl kustomize deploy/agent-gateway`, and install / upgrade / uninstall on the real
// kube-apiserver of testbed/kubetest. Its non-test files are what other packages use:
// RenderCollectorConfigs (the collector configurations the chart renders, for the
// end-to-end suite) and Generate (`make generate-helm`: the chart's copies of deploy/, its
// version and the values table of docs/helm.md).
package helmtest
