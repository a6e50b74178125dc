// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package helmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/netpulse/netpulse/testbed/disttest"
)

func readYAML(t testing.TB, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, yaml.Unmarshal(b, &m))
	return m
}

// RenderCollectorConfigs with the default values writes the shipped configurations of
// deploy/agent-gateway/config (as data), placeholders and all; with values, the values.
func TestRenderCollectorConfigs(t *testing.T) {
	bin, chart := helm(t)
	dir := t.TempDir()
	agent, gateway, err := RenderCollectorConfigs(bin, chart, nil, dir)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "agent.yaml"), agent)
	require.Equal(t, filepath.Join(dir, "gateway.yaml"), gateway)
	require.Equal(t, readYAML(t, repoPath(t, "deploy", "agent-gateway", "config", "agent.yaml")), readYAML(t, agent))
	require.Equal(t, readYAML(t, repoPath(t, "deploy", "agent-gateway", "config", "gateway.yaml")), readYAML(t, gateway))

	agent, gateway, err = RenderCollectorConfigs(bin, chart, map[string]any{
		"probe":          map[string]any{"interval": "1s", "k": 2},
		"nodeConditions": map[string]any{"enabled": false},
	}, filepath.Join(dir, "values"))
	require.NoError(t, err)
	require.Equal(t, "${env:NETPULSE_PROBE_INTERVAL:-1s}", nested(readYAML(t, agent), "receivers", "pod_probe", "interval"))
	require.EqualValues(t, 2, nested(readYAML(t, agent), "receivers", "pod_probe", "k"))
	require.Equal(t, false, nested(readYAML(t, gateway), "exporters", "pod_network_health", "node_conditions", "enabled"))

	_, _, err = RenderCollectorConfigs(bin, chart, map[string]any{"probe": map[string]any{"k": 0}}, dir)
	require.ErrorContains(t, err, "/probe/k")
}

// The configurations the chart renders are valid for the built collector (otelcol-netpulse
// validate, with a pod's downward-API environment), with the defaults and with every
// optional feature on (the gateway with the feature gates of its rendered args).
func TestRenderedConfigsValidate(t *testing.T) {
	collector := disttest.Collector(t)
	bin, chart := helm(t)
	for name, values := range map[string]map[string]any{"defaults": nil, "all-features": allFeatures(t)} {
		dir := t.TempDir()
		agent, gateway, err := RenderCollectorConfigs(bin, chart, values, dir)
		require.NoError(t, err)
		objs := render(t, values)
		for cfg, workload := range map[string]Object{
			agent:   mustFind(t, objs, "DaemonSet", "netpulse-agent"),
			gateway: mustFind(t, objs, "Deployment", "netpulse-gateway"),
		} {
			validate(t, collector, name, cfg, workload)
		}
	}
}

// validate runs otelcol-netpulse validate on a rendered configuration with the args of the
// workload that runs it and a pod's downward-API environment.
func validate(t *testing.T, collector, name, cfg string, workload Object) {
	t.Helper()
	args := []string{"validate"}
	for _, a := range container(t, workload)["args"].([]any) {
		if a == "--config=/etc/netpulse/"+filepath.Base(cfg) {
			a = "--config=" + cfg
		}
		args = append(args, a.(string))
	}
	cmd := exec.Command(collector, args...)
	cmd.Env = append(cmd.Environ(), "POD_NAME=p", "POD_UID=6f1c0e7a-0000-4000-8000-000000000001", "POD_NAMESPACE=netpulse",
		"NODE_NAME=n", "POD_IP=10.0.0.1", "POD_IPS=10.0.0.1")
	for k, v := range envOf(t, workload) {
		if k == "NETPULSE_SHARD_INDEX" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s: %s does not validate (%v):\n%s", name, filepath.Base(cfg), args, out)
}

// TestShardedConfigsValidate: `otelcol-netpulse validate` accepts the sharded agent and
// gateway configurations the chart renders: the per-shard exporters, the filters' OTTL
// conditions, the pipelines, pod_probe's shards and pod_network_health's shard, with the
// agents' and the second shard's args and environment.
func TestShardedConfigsValidate(t *testing.T) {
	collector := disttest.Collector(t)
	bin, chart := helm(t)
	allSharded := allFeatures(t)
	allSharded["gateway"].(map[string]any)["shards"] = 3
	for name, values := range map[string]map[string]any{"shards": shards2(), "shards relaying": shardsRelay(), "all-features sharded": allSharded} {
		agent, gateway, err := RenderCollectorConfigs(bin, chart, values, t.TempDir())
		require.NoError(t, err)
		require.Contains(t, readYAML(t, agent)["receivers"].(map[string]any)["pod_probe"], "shards")
		require.Contains(t, readYAML(t, gateway)["exporters"].(map[string]any)["pod_network_health"], "shard")
		objs := render(t, values)
		validate(t, collector, name, agent, mustFind(t, objs, "DaemonSet", "netpulse-agent"))
		validate(t, collector, name, gateway, mustFind(t, objs, "Deployment", "netpulse-gateway-1"))
	}
}
