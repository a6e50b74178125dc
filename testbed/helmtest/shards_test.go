// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package helmtest

import (
	"encoding/base64"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
)

// shards2 is the values of a two-shard gateway whose agents connect to every shard
// (gateway.relay false).
func shards2() map[string]any {
	return map[string]any{"gateway": map[string]any{"shards": 2, "relay": false}}
}

// shardsRelay is the values of a two-shard gateway as shipped: the shards relay.
func shardsRelay() map[string]any { return map[string]any{"gateway": map[string]any{"shards": 2}} }

// selects reports whether a matchLabels selector (or a Service's selector) selects pods
// with these labels.
func selects(t testing.TB, selector, podLabels any) bool {
	t.Helper()
	sel, ok := selector.(map[string]any)
	require.True(t, ok, "selector %v", selector)
	set := labels.Set{}
	for k, v := range podLabels.(map[string]any) {
		set[k] = v.(string)
	}
	want := labels.Set{}
	for k, v := range sel {
		want[k] = v.(string)
	}
	return labels.SelectorFromSet(want).Matches(set)
}

func envOf(t testing.TB, workload Object) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range container(t, workload)["env"].([]any) {
		m := e.(map[string]any)
		if v, ok := m["value"].(string); ok {
			env[m["name"].(string)] = v
		}
	}
	return env
}

// gateway.shards=2: two gateway Deployments, each with its own selector, shard label,
// index, leader Service and PodDisruptionBudget, and the old Service name kept for shard
// 0; the agents' configuration split into one exporter, filter and pipeline per shard;
// the gateway's configuration told the shard count; the objects selecting all gateway
// pods (NetworkPolicy, metrics Service) still selecting every shard's.
func TestTemplateShards(t *testing.T) {
	objs := render(t, shards2())
	single := render(t, nil)
	require.Nil(t, Find(objs, "Deployment", "netpulse-gateway"), "the unsharded Deployment rendered too")
	require.Nil(t, Find(objs, "PodDisruptionBudget", "netpulse-gateway"))
	require.Equal(t, 2, kinds(objs)["Deployment"])
	require.Equal(t, 2, kinds(objs)["PodDisruptionBudget"])

	var pods []map[string]any // each shard's pod labels
	var checksums []string
	for i := range 2 {
		name := fmt.Sprintf("netpulse-gateway-%d", i)
		shard := fmt.Sprint(i)
		dep := mustFind(t, objs, "Deployment", name)
		require.EqualValues(t, 2, nested(dep, "spec", "replicas"), "each shard has gateway.replicas")
		require.Equal(t, shard, nested(dep, "metadata", "labels", "netpulse.io/shard"))
		sel := nested(dep, "spec", "selector", "matchLabels")
		require.Equal(t, map[string]any{"app.kubernetes.io/name": "netpulse-gateway", "netpulse.io/shard": shard}, sel)
		podLabels := nested(dep, "spec", "template", "metadata", "labels").(map[string]any)
		require.Equal(t, shard, podLabels["netpulse.io/shard"])
		require.True(t, selects(t, sel, podLabels))
		pods = append(pods, podLabels)
		require.Equal(t, shard, envOf(t, dep)["NETPULSE_SHARD_INDEX"])
		checksums = append(checksums, nested(dep, "spec", "template", "metadata", "annotations", "checksum/config").(string))
		require.Equal(t, "netpulse-gateway-config", nested(dep, "spec", "template", "spec", "volumes").([]any)[0].(map[string]any)["configMap"].(map[string]any)["name"])
		// The default anti-affinity keeps a shard's replicas apart.
		term := nested(dep, "spec", "template", "spec", "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution").([]any)[0].(map[string]any)
		require.Equal(t, sel, nested(term, "podAffinityTerm", "labelSelector", "matchLabels"))

		svc := mustFind(t, objs, "Service", name)
		require.Equal(t, map[string]any{"app.kubernetes.io/name": "netpulse-gateway", "netpulse.io/shard": shard, "netpulse.io/gateway-leader": "true"},
			nested(svc, "spec", "selector"), "the Service selects the shard's leader")
		require.Equal(t, nested(mustFind(t, single, "Service", "netpulse-gateway"), "spec", "ports"), nested(svc, "spec", "ports"))

		pdb := mustFind(t, objs, "PodDisruptionBudget", name)
		require.Equal(t, sel, nested(pdb, "spec", "selector", "matchLabels"))
		require.EqualValues(t, 1, nested(pdb, "spec", "minAvailable"))
	}
	require.Equal(t, checksums[0], checksums[1], "one configuration for both shards")
	for i, o := range []string{"netpulse-gateway-0", "netpulse-gateway-1"} {
		other := pods[1-i]
		require.False(t, selects(t, nested(mustFind(t, objs, "Deployment", o), "spec", "selector", "matchLabels"), other), "%s selects the other shard's pods", o)
		require.False(t, selects(t, nested(mustFind(t, objs, "PodDisruptionBudget", o), "spec", "selector", "matchLabels"), other))
		leader := maps.Clone(other)
		leader["netpulse.io/gateway-leader"] = "true"
		require.False(t, selects(t, nested(mustFind(t, objs, "Service", o), "spec", "selector"), leader), "%s selects the other shard's leader", o)
		ownLeader := maps.Clone(pods[i])
		ownLeader["netpulse.io/gateway-leader"] = "true"
		require.True(t, selects(t, nested(mustFind(t, objs, "Service", o), "spec", "selector"), ownLeader))
		require.False(t, selects(t, nested(mustFind(t, objs, "Service", o), "spec", "selector"), pods[i]), "%s selects a standby", o)
	}
	// netpulse-gateway, where sidecars send their checks' results: shard 0's leader.
	old := mustFind(t, objs, "Service", "netpulse-gateway")
	require.Equal(t, map[string]any{"app.kubernetes.io/name": "netpulse-gateway", "netpulse.io/shard": "0", "netpulse.io/gateway-leader": "true"}, nested(old, "spec", "selector"))

	// Objects for every gateway pod select every shard's.
	for _, p := range pods {
		require.True(t, selects(t, nested(mustFind(t, objs, "NetworkPolicy", "netpulse-gateway"), "spec", "podSelector", "matchLabels"), p))
	}
	mon := render(t, map[string]any{"gateway": map[string]any{"shards": 2, "relay": false}, "monitoring": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}})
	for _, p := range pods {
		require.True(t, selects(t, nested(mustFind(t, mon, "Service", "netpulse-gateway-metrics"), "spec", "selector"), p))
	}

	// Leader election: each shard's Lease is netpulse-gateway-<i>, which the Role must not
	// rule out by name.
	role := mustFind(t, objs, "Role", "netpulse-gateway-leader-election")
	var leaseRule map[string]any
	for _, r := range role["rules"].([]any) {
		if rule := r.(map[string]any); fmt.Sprint(rule["resources"]) == "[leases]" {
			leaseRule = rule
		}
	}
	require.NotNil(t, leaseRule)
	require.Nil(t, leaseRule["resourceNames"], "the leases rule names its Leases: the shards' netpulse-gateway-<i> must be among them")
	require.Equal(t, "netpulse-gateway", nested(configOf(t, objs, "netpulse-gateway-config", "gateway.yaml"), "exporters", "pod_network_health", "leader_election", "lease_name"),
		"the exporter suffixes -<index> itself")

	// The agents: one exporter, filter and pipeline per shard.
	acfg := configOf(t, objs, "netpulse-agent-config", "agent.yaml")
	want := configOf(t, single, "netpulse-agent-config", "agent.yaml")
	require.EqualValues(t, 2, nested(acfg, "receivers", "pod_probe", "shards"))
	require.Nil(t, nested(want, "receivers", "pod_probe", "shards"))
	delete(acfg["receivers"].(map[string]any)["pod_probe"].(map[string]any), "shards")
	require.Equal(t, want["receivers"], acfg["receivers"], "pod_probe otherwise as with one gateway")
	singleExporter := nested(want, "exporters", "otlp_grpc").(map[string]any)
	require.Nil(t, nested(acfg, "exporters", "otlp_grpc"))
	require.Len(t, acfg["exporters"], 2)
	for i := range 2 {
		e := maps.Clone(singleExporter)
		e["endpoint"] = fmt.Sprintf("${env:NETPULSE_GATEWAY_ENDPOINT_%d:-netpulse-gateway-%d.netpulse.svc:4317}", i, i)
		require.Equal(t, e, nested(acfg, "exporters", fmt.Sprintf("otlp_grpc/shard-%d", i)), "shard %d's exporter: the single one's settings, its own endpoint", i)
		require.Equal(t, map[string]any{"error_mode": "ignore", "metrics": map[string]any{"datapoint": []any{
			fmt.Sprintf(`attributes["netpulse.shard"] != nil and attributes["netpulse.shard"] != %d`, i)}}},
			nested(acfg, "processors", fmt.Sprintf("filter/shard-%d", i)))
		require.Equal(t, map[string]any{
			"receivers":  []any{"pod_probe"},
			"processors": []any{"memory_limiter", fmt.Sprintf("filter/shard-%d", i), "batch"},
			"exporters":  []any{fmt.Sprintf("otlp_grpc/shard-%d", i)},
		}, nested(acfg, "service", "pipelines", fmt.Sprintf("metrics/shard-%d", i)))
	}
	require.Nil(t, nested(acfg, "service", "pipelines", "metrics"))
	require.Equal(t, []any{"otlp_grpc/shard-0"}, nested(acfg, "service", "pipelines", "logs/checks", "exporters"), "checks' results go to shard 0, which runs the checks")
	require.Len(t, nested(acfg, "service", "pipelines"), 3)

	// The gateway: the shard count, the index from the Deployment's environment; the rest as
	// with one gateway.
	gcfg := configOf(t, objs, "netpulse-gateway-config", "gateway.yaml")
	pnh := nested(gcfg, "exporters", "pod_network_health").(map[string]any)
	require.Equal(t, map[string]any{"count": float64(2), "index": "${env:NETPULSE_SHARD_INDEX}"}, pnh["shard"])
	delete(pnh, "shard")
	require.Equal(t, configOf(t, single, "netpulse-gateway-config", "gateway.yaml"), gcfg)

	// The generated certificate covers every shard's Service, and the old name.
	secret := mustFind(t, objs, "Secret", "netpulse-gateway-tls")
	data := map[string][]byte{}
	for k, v := range secret["data"].(map[string]any) {
		b, err := base64.StdEncoding.DecodeString(v.(string))
		require.NoError(t, err)
		data[k] = b
	}
	hosts := []string{"netpulse-gateway.netpulse.svc", "netpulse-gateway.netpulse.svc.cluster.local",
		"netpulse-gateway-0.netpulse.svc", "netpulse-gateway-0.netpulse.svc.cluster.local",
		"netpulse-gateway-1.netpulse.svc", "netpulse-gateway-1.netpulse.svc.cluster.local"}
	for _, h := range hosts {
		verifyServingCert(t, data, h)
	}
	require.Equal(t, strings.Join(hosts, ","), nested(secret, "metadata", "annotations", "netpulse.io/dns-names"),
		"the Secret records the names it covers, so an upgrade to more shards remakes it")
	require.Nil(t, nested(mustFind(t, single, "Secret", "netpulse-gateway-tls"), "metadata", "annotations"))
	cm := render(t, map[string]any{"gateway": map[string]any{"shards": 2, "relay": false},
		"tls": map[string]any{"certManager": map[string]any{"enabled": true, "issuerRef": map[string]any{"name": "ca"}}}})
	require.Equal(t, toAny(hosts), nested(mustFind(t, cm, "Certificate", "netpulse-gateway"), "spec", "dnsNames"))

	// PodDisruptionBudgets off: none for any shard.
	off := render(t, map[string]any{"gateway": map[string]any{"shards": 3, "relay": false, "podDisruptionBudget": map[string]any{"enabled": false}}})
	require.Zero(t, kinds(off)["PodDisruptionBudget"])
	require.Equal(t, 3, kinds(off)["Deployment"])
	require.Equal(t, 4, kinds(off)["Service"], "3 shard Services and netpulse-gateway")
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// gateway.shards=1, the default, renders exactly what no shards value renders: no shard
// label, index, filter or shard setting anywhere.
func TestTemplateOneShardIsTheDefault(t *testing.T) {
	def := render(t, nil)
	one := render(t, map[string]any{"gateway": map[string]any{"shards": 1}})
	withoutSecret := func(objs []Object) []Object {
		var out []Object
		for _, o := range objs {
			if o["kind"] != "Secret" { // the generated certificate differs at every render
				out = append(out, o)
			}
		}
		return out
	}
	require.Equal(t, withoutSecret(def), withoutSecret(one))
	bin, chart := helm(t)
	out, err := Template(bin, chart, nil)
	require.NoError(t, err)
	for _, s := range []string{"netpulse.io/shard", "NETPULSE_SHARD_INDEX", "shard-0", "shards:", "\n        shard:"} {
		require.NotContains(t, string(out), s)
	}
}

// agent.config still merges with shards: what it sets on otlp_grpc and the metrics
// pipeline applies to every shard's exporter and pipeline; a shard's own exporter,
// filter or pipeline in it is merged over the generated one.
func TestTemplateShardsAgentConfigMerge(t *testing.T) {
	objs := render(t, map[string]any{"gateway": map[string]any{"shards": 2, "relay": false}, "agent": map[string]any{"config": map[string]any{
		"processors": map[string]any{"resource/site": map[string]any{"attributes": []any{map[string]any{"key": "site", "value": "a", "action": "upsert"}}}},
		"exporters": map[string]any{
			"otlp_grpc":         map[string]any{"sending_queue": map[string]any{"queue_size": 10}},
			"otlp_grpc/shard-1": map[string]any{"endpoint": "gw-1.example:4317"},
		},
		"service": map[string]any{"pipelines": map[string]any{
			"metrics":         map[string]any{"processors": []any{"memory_limiter", "resource/site", "batch"}},
			"metrics/shard-0": map[string]any{"exporters": []any{"otlp_grpc/shard-0", "debug"}},
		}},
	}}})
	acfg := configOf(t, objs, "netpulse-agent-config", "agent.yaml")
	require.Nil(t, nested(acfg, "exporters", "otlp_grpc"))
	for i := range 2 {
		require.EqualValues(t, 10, nested(acfg, "exporters", fmt.Sprintf("otlp_grpc/shard-%d", i), "sending_queue", "queue_size"))
		require.Equal(t, "${env:NETPULSE_GATEWAY_CA_FILE:-/var/run/secrets/netpulse/gateway-ca/ca.crt}", nested(acfg, "exporters", fmt.Sprintf("otlp_grpc/shard-%d", i), "tls", "ca_file"))
		require.Equal(t, []any{"memory_limiter", "resource/site", fmt.Sprintf("filter/shard-%d", i), "batch"},
			nested(acfg, "service", "pipelines", fmt.Sprintf("metrics/shard-%d", i), "processors"))
	}
	require.Equal(t, "${env:NETPULSE_GATEWAY_ENDPOINT_0:-netpulse-gateway-0.netpulse.svc:4317}", nested(acfg, "exporters", "otlp_grpc/shard-0", "endpoint"))
	require.Equal(t, "gw-1.example:4317", nested(acfg, "exporters", "otlp_grpc/shard-1", "endpoint"))
	require.Equal(t, []any{"otlp_grpc/shard-0", "debug"}, nested(acfg, "service", "pipelines", "metrics/shard-0", "exporters"))
	require.Equal(t, []any{"otlp_grpc/shard-1"}, nested(acfg, "service", "pipelines", "metrics/shard-1", "exporters"))
	require.Equal(t, []any{"otlp_grpc/shard-0"}, nested(acfg, "service", "pipelines", "logs/checks", "exporters"))

	// In another namespace, the shards' default endpoints follow it.
	bin, chart := helm(t)
	out, err := Template(bin, chart, shards2(), "--namespace", "observability")
	require.NoError(t, err)
	other, err := Decode(out)
	require.NoError(t, err)
	require.Equal(t, "${env:NETPULSE_GATEWAY_ENDPOINT_1:-netpulse-gateway-1.observability.svc:4317}",
		nested(configOf(t, other, "netpulse-agent-config", "agent.yaml"), "exporters", "otlp_grpc/shard-1", "endpoint"))
}

// RenderCollectorConfigs with shards: the agents' configuration with the shards'
// exporters and the one gateway configuration all shards run (the e2e suite's).
func TestRenderCollectorConfigsShards(t *testing.T) {
	bin, chart := helm(t)
	dir := t.TempDir()
	agent, gateway, err := RenderCollectorConfigs(bin, chart, shards2(), dir)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "agent.yaml"), agent)
	a := readYAML(t, agent)
	require.EqualValues(t, 2, nested(a, "receivers", "pod_probe", "shards"))
	require.Equal(t, "${env:NETPULSE_GATEWAY_ENDPOINT_1:-netpulse-gateway-1.netpulse.svc:4317}", nested(a, "exporters", "otlp_grpc/shard-1", "endpoint"))
	g := readYAML(t, gateway)
	require.Equal(t, map[string]any{"count": float64(2), "index": "${env:NETPULSE_SHARD_INDEX}"}, nested(g, "exporters", "pod_network_health", "shard"))
}

// gateway.shards=2 as shipped (gateway.relay): each agent holds one connection, to
// netpulse-gateway-relay (every shard's leader, no standby), whose shard forwards to the
// others: the agents' one exporter and pipeline (the checks' results to shard 0); the
// gateway's relay (an endpoint per shard, its own CA and token), k8s_token_auth's relay
// account, the export pipeline keeping its own shard's points without the relayed
// identity; the Deployments' relay token; the NetworkPolicy letting shards reach each
// other; the certificate covering the relay Service.
func TestTemplateShardsRelay(t *testing.T) {
	objs := render(t, shardsRelay())
	single := render(t, nil)

	relaySvc := mustFind(t, objs, "Service", "netpulse-gateway-relay")
	for i := range 2 {
		dep := mustFind(t, objs, "Deployment", fmt.Sprintf("netpulse-gateway-%d", i))
		pod := maps.Clone(nested(dep, "spec", "template", "metadata", "labels").(map[string]any))
		require.False(t, selects(t, nested(relaySvc, "spec", "selector"), pod), "the relay Service selects a standby")
		pod["netpulse.io/gateway-leader"] = "true"
		require.True(t, selects(t, nested(relaySvc, "spec", "selector"), pod), "the relay Service selects shard %d's leader", i)
		require.True(t, selects(t, nested(mustFind(t, objs, "NetworkPolicy", "netpulse-gateway"), "spec", "ingress").([]any)[0].(map[string]any)["from"].([]any)[1].(map[string]any)["podSelector"].(map[string]any)["matchLabels"], pod),
			"the NetworkPolicy lets the shards reach each other's OTLP port")
		var token map[string]any
		for _, v := range nested(dep, "spec", "template", "spec", "volumes").([]any) {
			if v.(map[string]any)["name"] == "relay-token" {
				token = v.(map[string]any)
			}
		}
		require.NotNil(t, token, "shard %d mounts its relay token", i)
		require.Equal(t, "netpulse-gateway", nested(token, "projected", "sources").([]any)[0].(map[string]any)["serviceAccountToken"].(map[string]any)["audience"])
	}

	acfg := configOf(t, objs, "netpulse-agent-config", "agent.yaml")
	want := configOf(t, single, "netpulse-agent-config", "agent.yaml")
	require.EqualValues(t, 2, nested(acfg, "receivers", "pod_probe", "shards"))
	e := maps.Clone(nested(want, "exporters", "otlp_grpc").(map[string]any))
	e["endpoint"] = "${env:NETPULSE_GATEWAY_ENDPOINT:-netpulse-gateway-relay.netpulse.svc:4317}"
	require.Equal(t, e, nested(acfg, "exporters", "otlp_grpc"), "one exporter: the single one's settings, the relay Service")
	require.Len(t, acfg["exporters"], 1)
	require.Equal(t, want["service"], acfg["service"], "the pipelines as with one gateway: the checks' results too go to the relay, which forwards them to shard 0")
	require.Nil(t, nested(acfg, "processors", "filter/shard-0"))

	g := configOf(t, objs, "netpulse-gateway-config", "gateway.yaml")
	relay := nested(g, "exporters", "pod_network_health", "relay").(map[string]any)
	require.Equal(t, true, relay["enabled"])
	require.Equal(t, []any{"${env:NETPULSE_RELAY_ENDPOINT_0:-netpulse-gateway-0.netpulse.svc:4317}", "${env:NETPULSE_RELAY_ENDPOINT_1:-netpulse-gateway-1.netpulse.svc:4317}"}, relay["endpoints"])
	require.Equal(t, "bearertokenauth/relay", nested(relay, "client", "auth", "authenticator"))
	require.Equal(t, "${env:NETPULSE_RELAY_CA_FILE:-/var/run/secrets/netpulse/tls/ca.crt}", nested(relay, "client", "tls", "ca_file"))
	require.Contains(t, nested(g, "service", "extensions"), "bearertokenauth/relay")
	// A restarted shard's peers reconnect within a round, as the agents do.
	require.Equal(t, []any{map[string]any{"id": "grpc_backoff"}}, nested(relay, "client", "middlewares"))
	require.Equal(t, "10s", nested(g, "extensions", "grpc_backoff", "max_delay"))
	require.Contains(t, nested(g, "service", "extensions"), "grpc_backoff")
	auth := nested(g, "extensions", "k8s_token_auth").(map[string]any)
	require.Equal(t, []any{"netpulse/netpulse-agent", "netpulse/netpulse-gateway"}, auth["service_accounts"])
	require.Equal(t, []any{"netpulse/netpulse-agent"}, auth["agent_service_accounts"])
	require.Equal(t, []any{"netpulse/netpulse-gateway"}, auth["relay_service_accounts"])
	require.Equal(t, true, nested(g, "processors", "k8s_net_attributes", "admission", "keep_relayed_identity"))
	require.Nil(t, nested(g, "processors", "k8s_net_attributes/export", "admission", "keep_relayed_identity"))
	require.Equal(t, []any{"memory_limiter", "filter/own_shard", "filter/stable_pairs", "k8s_net_attributes/export", "explicit_buckets", "batch"},
		nested(g, "service", "pipelines", "metrics/export", "processors"))
	require.Equal(t, []any{"memory_limiter", "k8s_net_attributes"}, nested(g, "service", "pipelines", "metrics/health", "processors"))

	secret := mustFind(t, objs, "Secret", "netpulse-gateway-tls")
	require.Contains(t, nested(secret, "metadata", "annotations", "netpulse.io/dns-names"), "netpulse-gateway-relay.netpulse.svc,netpulse-gateway-relay.netpulse.svc.cluster.local")
	require.Nil(t, Find(single, "Service", "netpulse-gateway-relay"))
	require.Nil(t, Find(render(t, shards2()), "Service", "netpulse-gateway-relay"))
}
