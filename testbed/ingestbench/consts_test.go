// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package ingestbench

// Names from deploy/: the namespace and the agents' and gateway's service accounts.
const (
	namespace             = "netpulse"
	agentServiceAccount   = "netpulse-agent"
	gatewayServiceAccount = "netpulse-gateway"
	// audience of the agents' projected tokens (gateway.yaml's k8s_token_auth.audience).
	audience = "netpulse-gateway"
)
