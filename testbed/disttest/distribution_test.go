// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package disttest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/netpulse/netpulse/testbed/kubetest"
)

// The components users expect beside netpulse's own, by kind (component types at v0.159).
var wantComponents = map[string][]string{
	"receivers":  {"otlp", "pod_probe"},
	"processors": {"batch", "memory_limiter", "k8s_attributes", "k8s_net_attributes", "filter", "explicit_buckets"},
	"exporters":  {"debug", "otlp_grpc", "otlp_http", "prometheus", "prometheus_remote_write", "pod_network_health"},
	"extensions": {"health_check", "pprof", "zpages", "file_storage", "bearertokenauth", "k8s_token_auth"},
}

func testdata(t *testing.T, name string) string {
	root, err := kubetest.RepoRoot()
	require.NoError(t, err)
	return filepath.Join(root, "testdata", name)
}

func TestComponentsListed(t *testing.T) {
	out, err := exec.Command(Collector(t), "components").CombinedOutput()
	require.NoError(t, err, "%s", out)

	var listed struct {
		BuildInfo struct {
			Command string `yaml:"command"`
		} `yaml:"buildinfo"`
		Components map[string][]struct {
			Name string `yaml:"name"`
		} `yaml:",inline"`
	}
	require.NoError(t, yaml.Unmarshal(out, &listed), "%s", out)
	require.Equal(t, "otelcol-netpulse", listed.BuildInfo.Command)
	for kind, names := range wantComponents {
		have := map[string]bool{}
		for _, c := range listed.Components[kind] {
			have[c.Name] = true
		}
		for _, n := range names {
			require.Truef(t, have[n], "%s %q missing from `components`:\n%s", kind, n, out)
		}
	}
}

func TestValidateSampleConfig(t *testing.T) {
	out, err := exec.Command(Collector(t), "validate", "--config", testdata(t, "otelcol-standard.yaml")).CombinedOutput()
	require.NoError(t, err, "validate failed:\n%s", out)
}

func TestValidateRejectsInvalidConfig(t *testing.T) {
	out, err := exec.Command(Collector(t), "validate", "--config", testdata(t, "otelcol-invalid.yaml")).CombinedOutput()
	require.Error(t, err, "an invalid config validated:\n%s", out)
	require.True(t, strings.Contains(string(out), "batch"), "the error should name the offending component:\n%s", out)
}

// The collector configurations shipped in deploy/ validate as they are (with the
// downward-API environment a pod would have).
func TestValidateDeployConfigs(t *testing.T) {
	root, err := kubetest.RepoRoot()
	require.NoError(t, err)
	for _, cfg := range []string{"agent-gateway/config/agent.yaml", "agent-gateway/config/gateway.yaml", "all-in-one/config/all-in-one.yaml"} {
		cmd := exec.Command(Collector(t), "validate", "--config", filepath.Join(root, "deploy", cfg))
		cmd.Env = append(cmd.Environ(), "POD_NAME=p", "POD_UID=6f1c0e7a-0000-4000-8000-000000000001", "POD_NAMESPACE=netpulse",
			"NODE_NAME=n", "POD_IP=10.0.0.1", "POD_IPS=10.0.0.1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s does not validate:\n%s", cfg, out)
	}
}
