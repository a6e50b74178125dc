// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package helmtest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter"
)

// helm lint --strict passes with the default values, with every optional feature on, and
// with them on a sharded gateway.
func TestLintStrict(t *testing.T) {
	_, chart := helm(t)
	for _, args := range [][]string{nil, {"--values", "testdata/all-features.yaml"}, {"--values", "testdata/all-features.yaml", "--set", "gateway.shards=3"}} {
		out, err := runHelm(t, append([]string{"lint", "--strict", chart}, args...)...)
		require.NoError(t, err, "helm lint --strict %v:\n%s", args, out)
		require.Contains(t, out, "0 chart(s) failed")
	}
}

// The packaged chart (helm package) carries the files the templates read and the CRD: it
// renders the same objects as the chart's directory.
func TestPackage(t *testing.T) {
	bin, chart := helm(t)
	dir := t.TempDir()
	out, err := runHelm(t, "package", chart, "--destination", dir)
	require.NoError(t, err, "helm package:\n%s", out)
	version, err := DistVersion(repoPath(t))
	require.NoError(t, err)
	tgz := filepath.Join(dir, "netpulse-"+version+".tgz")
	packaged, err := Template(bin, tgz, nil, "--include-crds")
	require.NoError(t, err)
	objs, err := Decode(packaged)
	require.NoError(t, err)
	want := render(t, nil, "--include-crds")
	require.Equal(t, kinds(want), kinds(objs))
	for _, name := range []string{"netpulse-agent-config", "netpulse-gateway-config"} {
		require.Equal(t, nested(mustFind(t, want, "ConfigMap", name), "data"), nested(mustFind(t, objs, "ConfigMap", name), "data"))
	}
	out, err = runHelm(t, "show", "crds", tgz)
	require.NoError(t, err, out)
	require.Contains(t, out, "name: podnetworkhealths.netpulse.io")
}

// Chart.yaml's version and appVersion are builder-config.yaml's dist.version, the one
// version of the project (also the image tag the chart deploys by default).
func TestChartVersionIsDistVersion(t *testing.T) {
	version, err := DistVersion(repoPath(t))
	require.NoError(t, err)
	var chart struct {
		APIVersion string `json:"apiVersion"`
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	b, err := os.ReadFile(repoPath(t, ChartPath, "Chart.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &chart))
	require.Equal(t, "v2", chart.APIVersion)
	require.Equal(t, version, chart.Version, "Chart.yaml version: run make generate-helm")
	require.Equal(t, version, chart.AppVersion, "Chart.yaml appVersion: run make generate-helm")
	ds := mustFind(t, render(t, nil), "DaemonSet", "netpulse-agent")
	require.Equal(t, "ghcr.io/netpulse/otelcol-netpulse:"+version, container(t, ds)["image"])
}

// The chart's copies of deploy/, its version and docs/helm.md's values table are what
// `make generate-helm` writes (make check-generated checks the same in CI).
func TestGeneratedFilesUpToDate(t *testing.T) {
	stale, err := Generate(repoPath(t), true)
	require.NoError(t, err)
	require.Empty(t, stale, "out of date: run make generate-helm")
}

// Bad values fail helm template with a message naming the key (values.schema.json).
func TestBadValuesRefusedWithTheirKey(t *testing.T) {
	_, chart := helm(t)
	for _, c := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{"--set", "probez.k=1"}, "additional properties 'probez' not allowed"},         // a typo at the top
		{[]string{"--set", "gateway.replica=3"}, "additional properties 'replica' not allowed"}, // and below it
		{[]string{"--set", "probe.interval=10"}, "/probe/interval"},                             // a number, not a duration
		{[]string{"--set", "probe.interval=ten seconds"}, "/probe/interval"},
		{[]string{"--set", "probe.timeout=2"}, "/probe/timeout"},
		{[]string{"--set", "probe.k=0"}, "/probe/k"},
		{[]string{"--set", "probe.k=1.5"}, "/probe/k"},
		{[]string{"--set", "probe.budget=-1"}, "/probe/budget"},
		{[]string{"--set", "gateway.writeBudget.qps=-1"}, "/gateway/writeBudget/qps"},
		{[]string{"--set", "gateway.writeBudget.burst=0"}, "/gateway/writeBudget/burst"},
		{[]string{"--set", "nodeConditions.enabled=yes"}, "/nodeConditions/enabled"},
		{[]string{"--set-string", "nodeConditions.enabled=true"}, "/nodeConditions/enabled"},
		{[]string{"--set", "readinessGate.enabled=1"}, "/readinessGate/enabled"},
		{[]string{"--set", "readinessGate.minReachingNodes=1"}, "/readinessGate/minReachingNodes"},
		{[]string{"--set", "readinessGate.inject.enabled=on"}, "/readinessGate/inject/enabled"},
		{[]string{"--set", "readinessGate.inject.failurePolicy=Never"}, "/readinessGate/inject/failurePolicy"},
		{[]string{"--set", "readinessGate.inject.apiVersion=v1"}, "/readinessGate/inject/apiVersion"},
		{[]string{"--set", "readinessGate.inject.namespaceLabels=null"}, "missing property 'namespaceLabels'"}, // would select every namespace
		{[]string{"--set", "readinessGate.inject.namespaceLabels.team=1"}, "/readinessGate/inject/namespaceLabels/team"},
		{[]string{"--set", "image.pullPolicy=Sometimes"}, "/image/pullPolicy"},
		{[]string{"--set", "agent.config=verbose"}, "/agent/config"},
		{[]string{"--set", "gateway.shards=0"}, "at '/gateway/shards': minimum: got 0, want 1"},
		{[]string{"--set", "gateway.shards=65"}, "at '/gateway/shards': maximum: got 65, want 64"},
		{[]string{"--set", "gateway.shards=two"}, "at '/gateway/shards': got string, want integer"},
		{[]string{"--set", "gateway.shards=1.5"}, "/gateway/shards"},
		{[]string{"--set", "gateway.shards=null"}, "missing property 'shards'"}, // would render no gateway at all
		{[]string{"--set", "probe.pathMTU.enabled=yes"}, "/probe/pathMTU/enabled"},
		{[]string{"--set", "probe.pathMTU.every=3"}, "additional properties 'every' not allowed"}, // agent.config sets the rest
		{[]string{"--set", "gateway.flapWindow=60"}, "/gateway/flapWindow"},
		{[]string{"--set", "gateway.leaderElection.retryPeriod=10"}, "/gateway/leaderElection/retryPeriod"},
		{[]string{"--set", "gateway.leaderElection.leaseTime=1m"}, "additional properties 'leaseTime' not allowed"},
		{[]string{"--set", "gateway.goMemLimit=400Mi"}, "/gateway/goMemLimit"}, // Go's unit is MiB
	} {
		out, err := runHelm(t, append([]string{"template", "netpulse", chart}, c.args...)...)
		require.Error(t, err, "helm template %v was accepted", c.args)
		require.Contains(t, out, "values don't meet the specifications of the schema", "helm template %v", c.args)
		require.Contains(t, out, c.want, "helm template %v: the error should name the key", c.args)
	}
	// A cert-manager Certificate needs its issuer.
	out, err := runHelm(t, "template", "netpulse", chart, "--set", "tls.certManager.enabled=true")
	require.Error(t, err)
	require.Contains(t, out, "tls.certManager.issuerRef.name")
}

// Every optional feature on: each renders, with the values it was given.
func TestTemplateAllFeatures(t *testing.T) {
	objs := render(t, allFeatures(t), "--include-crds")
	ns := mustFind(t, objs, "Namespace", "netpulse")
	require.Equal(t, "restricted", nested(ns, "metadata", "labels", "pod-security.kubernetes.io/enforce"))
	mustFind(t, objs, "CustomResourceDefinition", "podnetworkhealths.netpulse.io")

	// TLS from cert-manager: a Certificate for the gateway's names, no generated Secret.
	cert := mustFind(t, objs, "Certificate", "netpulse-gateway")
	require.Equal(t, "netpulse-gateway-tls", nested(cert, "spec", "secretName"))
	require.Equal(t, []any{"netpulse-gateway.netpulse.svc", "netpulse-gateway.netpulse.svc.cluster.local"}, nested(cert, "spec", "dnsNames"))
	require.Equal(t, "netpulse-ca", nested(cert, "spec", "issuerRef", "name"))
	require.Nil(t, Find(objs, "Secret", "netpulse-gateway-tls"))

	// Both opt-in writers: their RBAC, the feature gate, the configuration.
	for _, name := range []string{"netpulse-gateway-node-conditions", "netpulse-gateway-readiness-gate"} {
		mustFind(t, objs, "ClusterRole", name)
		crb := mustFind(t, objs, "ClusterRoleBinding", name)
		require.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "name": "netpulse-gateway", "namespace": "netpulse"}}, crb["subjects"])
	}
	gw := mustFind(t, objs, "Deployment", "netpulse-gateway")
	gwc := container(t, gw)
	require.Contains(t, gwc["args"], "--feature-gates=exporter.podnetworkhealth.readinessGate")
	gcfg := configOf(t, objs, "netpulse-gateway-config", "gateway.yaml")
	pnh := nested(gcfg, "exporters", "pod_network_health").(map[string]any)
	require.Equal(t, true, nested(pnh, "readiness_gate", "enabled"))
	require.EqualValues(t, 3, nested(pnh, "readiness_gate", "min_reaching_nodes"))
	mustFind(t, objs, "MutatingAdmissionPolicy", "netpulse-readiness-gate")
	mustFind(t, objs, "MutatingAdmissionPolicyBinding", "netpulse-readiness-gate")
	require.Equal(t, true, nested(pnh, "node_conditions", "enabled"))
	require.EqualValues(t, 10, pnh["qps"])
	require.EqualValues(t, 20, pnh["burst"])
	// The Lease timings (fewer renewals: an API write each), the rest of leader_election kept.
	require.Equal(t, map[string]any{"enabled": true, "lease_name": "netpulse-gateway", "lease_namespace": "${env:POD_NAMESPACE}",
		"identity": "${env:POD_NAME}", "leader_label": "netpulse.io/gateway-leader",
		"lease_duration": "60s", "renew_deadline": "40s", "retry_period": "10s"}, pnh["leader_election"])
	require.Equal(t, "netpulse-gateway-test", nested(gcfg, "extensions", "k8s_token_auth", "audience"))
	// The user's exporter is merged in; the shipped configuration around it stays.
	require.Equal(t, "otel-collector.observability.svc:4317", nested(gcfg, "exporters", "otlp_grpc/backend", "endpoint"))
	require.Equal(t, []any{"prometheus", "otlp_grpc/backend"}, nested(gcfg, "service", "pipelines", "metrics/export", "exporters"))
	require.NotNil(t, nested(gcfg, "exporters", "prometheus"))
	require.Equal(t, []any{"otlp"}, nested(gcfg, "service", "pipelines", "metrics/health", "receivers"))

	// The probe values, inside the environment placeholders the suite overrides.
	acfg := configOf(t, objs, "netpulse-agent-config", "agent.yaml")
	probe := nested(acfg, "receivers", "pod_probe").(map[string]any)
	require.Equal(t, "${env:NETPULSE_PROBE_INTERVAL:-30s}", probe["interval"])
	require.Equal(t, "${env:NETPULSE_PROBE_TIMEOUT:-3s}", probe["timeout"])
	require.EqualValues(t, 4, probe["k"])
	require.EqualValues(t, 500, probe["probe_budget"])
	require.EqualValues(t, 2, probe["stable_peers"])
	// The optional features: path-MTU probes on the agents, flap folding on the gateway.
	require.Equal(t, "${env:NETPULSE_PATH_MTU:-true}", nested(probe, "icmp", "path_mtu", "enabled"))
	require.Equal(t, "${env:NETPULSE_FLAP_WINDOW:-1m}", pnh["flap_window"])

	// Per-workload settings.
	ds := mustFind(t, objs, "DaemonSet", "netpulse-agent")
	ac := container(t, ds)
	require.True(t, strings.HasSuffix(ac["image"].(string), ":0.1.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"), ac["image"])
	require.Equal(t, "IfNotPresent", ac["imagePullPolicy"])
	require.Contains(t, ac["env"], map[string]any{"name": "GODEBUG", "value": "madvdontneed=1"})
	require.Equal(t, []any{map[string]any{"name": "regcred"}}, nested(ds, "spec", "template", "spec", "imagePullSecrets"))
	require.Equal(t, "agent", nested(ds, "spec", "template", "metadata", "labels", "example.com/pod"))
	require.Equal(t, "agent", nested(ds, "spec", "template", "metadata", "annotations", "example.com/note"))
	require.Equal(t, "true", nested(ds, "metadata", "labels", "example.com/agent"))
	require.Equal(t, "linux", nested(ds, "spec", "template", "spec", "nodeSelector", "kubernetes.io/os"))
	require.NotNil(t, nested(ds, "spec", "template", "spec", "affinity", "nodeAffinity"))
	vols := nested(ds, "spec", "template", "spec", "volumes").([]any)
	require.Contains(t, vols, map[string]any{"name": "gateway-token", "projected": map[string]any{"sources": []any{
		map[string]any{"serviceAccountToken": map[string]any{"audience": "netpulse-gateway-test", "expirationSeconds": float64(7200), "path": "token"}}}}})
	require.EqualValues(t, 3, nested(gw, "spec", "replicas"))
	require.Equal(t, "system-cluster-critical", nested(gw, "spec", "template", "spec", "priorityClassName"))
	require.Len(t, nested(gw, "spec", "template", "spec", "tolerations"), 1)
	require.Equal(t, "gateway", nested(gw, "spec", "template", "metadata", "labels", "example.com/pod"))
	require.EqualValues(t, 2, nested(mustFind(t, objs, "PodDisruptionBudget", "netpulse-gateway"), "spec", "minAvailable"))
	for _, o := range objs {
		if o["kind"] != "CustomResourceDefinition" {
			require.Equal(t, "network", nested(o, "metadata", "labels", "example.com/team"), "commonLabels on %s %s", o["kind"], nested(o, "metadata", "name"))
		}
	}

	// Monitoring: every gateway replica scraped; the alert rules and the dashboard of deploy/monitoring.
	svc := mustFind(t, objs, "Service", "netpulse-gateway-metrics")
	require.Equal(t, map[string]any{"app.kubernetes.io/name": "netpulse-gateway"}, nested(svc, "spec", "selector"))
	sm := mustFind(t, objs, "ServiceMonitor", "netpulse-gateway")
	require.Equal(t, "kube-prometheus-stack", nested(sm, "metadata", "labels", "release"))
	require.Len(t, nested(sm, "spec", "endpoints"), 2)
	var rules map[string]any
	b, err := os.ReadFile(repoPath(t, "deploy", "monitoring", "rules.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &rules))
	require.Equal(t, rules["groups"], nested(mustFind(t, objs, "PrometheusRule", "netpulse"), "spec", "groups"))
	dash, err := os.ReadFile(repoPath(t, "deploy", "monitoring", "dashboard.json"))
	require.NoError(t, err)
	require.JSONEq(t, string(dash), nested(mustFind(t, objs, "ConfigMap", "netpulse-dashboard"), "data", "netpulse.json").(string))
}

// The switches off: no opt-in RBAC, policy, budget or Secret; the node condition off in
// the configuration too.
func TestTemplateSwitchesOff(t *testing.T) {
	objs := render(t, map[string]any{
		"nodeConditions":         map[string]any{"enabled": false},
		"networkPolicy":          map[string]any{"enabled": false},
		"tls":                    map[string]any{"generate": map[string]any{"enabled": false}},
		"gateway":                map[string]any{"podDisruptionBudget": map[string]any{"enabled": false}},
		"gatewayAdmissionPolicy": map[string]any{"enabled": false},
	})
	n := kinds(objs)
	require.Zero(t, n["NetworkPolicy"])
	require.Zero(t, n["ValidatingAdmissionPolicy"])
	require.Zero(t, n["ValidatingAdmissionPolicyBinding"])
	require.Zero(t, n["PodDisruptionBudget"])
	require.Zero(t, n["Secret"])
	require.Zero(t, n["Namespace"])
	for _, o := range objs {
		name := nested(o, "metadata", "name").(string)
		require.False(t, strings.HasPrefix(name, "netpulse-gateway-node-conditions") || strings.HasPrefix(name, "netpulse-gateway-readiness-gate"), "%s %s rendered", o["kind"], name)
	}
	cfg := configOf(t, objs, "netpulse-gateway-config", "gateway.yaml")
	require.Equal(t, false, nested(cfg, "exporters", "pod_network_health", "node_conditions", "enabled"))
	require.False(t, slices.Contains(container(t, mustFind(t, objs, "Deployment", "netpulse-gateway"))["args"].([]any), any("--feature-gates=exporter.podnetworkhealth.readinessGate")))

	// The opt-in RBAC follows the merged configuration, not only the switch.
	objs = render(t, map[string]any{
		"nodeConditions": map[string]any{"enabled": false},
		"gateway": map[string]any{"config": map[string]any{"exporters": map[string]any{"pod_network_health": map[string]any{
			"node_conditions": map[string]any{"enabled": true}}}}},
	})
	mustFind(t, objs, "ClusterRole", "netpulse-gateway-node-conditions")
	// The switch on and the writer off in the configuration: the gateway keeps the right
	// to remove the conditions it wrote.
	objs = render(t, map[string]any{
		"gateway": map[string]any{"config": map[string]any{"exporters": map[string]any{"pod_network_health": map[string]any{
			"node_conditions": map[string]any{"enabled": false}}}}},
	})
	mustFind(t, objs, "ClusterRole", "netpulse-gateway-node-conditions")
	cfg = configOf(t, objs, "netpulse-gateway-config", "gateway.yaml")
	require.Equal(t, false, nested(cfg, "exporters", "pod_network_health", "node_conditions", "enabled"))
}

// The optional features are as deploy/ ships them (path-MTU probes off, flap folding on
// at 1m): the chart's defaults leave their environment placeholders as the shipped files
// have them.
func TestOptionalFeaturesAsShipped(t *testing.T) {
	objs := render(t, nil)
	acfg := configOf(t, objs, "netpulse-agent-config", "agent.yaml")
	require.Equal(t, "${env:NETPULSE_PATH_MTU:-false}", nested(acfg, "receivers", "pod_probe", "icmp", "path_mtu", "enabled"))
	gcfg := configOf(t, objs, "netpulse-gateway-config", "gateway.yaml")
	require.Equal(t, "${env:NETPULSE_FLAP_WINDOW:-1m}", nested(gcfg, "exporters", "pod_network_health", "flap_window"))
	require.Equal(t, "all", nested(gcfg, "exporters", "pod_network_health", "pair_objects"))
	require.Equal(t, "auto", nested(gcfg, "exporters", "pod_network_health", "freshness"))
	// agent.config and gateway.config still win over the values.
	objs = render(t, map[string]any{
		"probe": map[string]any{"pathMTU": map[string]any{"enabled": true}},
		"agent": map[string]any{"config": map[string]any{"receivers": map[string]any{"pod_probe": map[string]any{
			"icmp": map[string]any{"path_mtu": map[string]any{"every": 12}}}}}},
		"gateway": map[string]any{"flapWindow": "2m", "pairObjects": "problems", "freshness": "heartbeat", "config": map[string]any{"exporters": map[string]any{"pod_network_health": map[string]any{
			"flap_window": "30s"}}}},
	})
	acfg = configOf(t, objs, "netpulse-agent-config", "agent.yaml")
	pmtu := nested(acfg, "receivers", "pod_probe", "icmp", "path_mtu").(map[string]any)
	require.Equal(t, "${env:NETPULSE_PATH_MTU:-true}", pmtu["enabled"])
	require.EqualValues(t, 12, pmtu["every"])
	gcfg = configOf(t, objs, "netpulse-gateway-config", "gateway.yaml")
	require.Equal(t, "30s", nested(gcfg, "exporters", "pod_network_health", "flap_window"))
	require.Equal(t, "problems", nested(gcfg, "exporters", "pod_network_health", "pair_objects"))
	require.Equal(t, "heartbeat", nested(gcfg, "exporters", "pod_network_health", "freshness"))
}

// A changed configuration changes the pods' checksum/config annotation, so they roll.
func TestConfigChangeRollsPods(t *testing.T) {
	checksum := func(objs []Object, kind, name string) string {
		s, _ := nested(mustFind(t, objs, kind, name), "spec", "template", "metadata", "annotations", "checksum/config").(string)
		require.Len(t, s, 64)
		return s
	}
	def := render(t, nil)
	changed := render(t, map[string]any{"probe": map[string]any{"k": 5}, "gateway": map[string]any{"config": map[string]any{"exporters": map[string]any{"pod_network_health": map[string]any{"heartbeat": "5m"}}}}})
	require.Equal(t, checksum(def, "DaemonSet", "netpulse-agent"), checksum(render(t, nil), "DaemonSet", "netpulse-agent"), "the checksum is stable")
	require.NotEqual(t, checksum(def, "DaemonSet", "netpulse-agent"), checksum(changed, "DaemonSet", "netpulse-agent"))
	require.NotEqual(t, checksum(def, "Deployment", "netpulse-gateway"), checksum(changed, "Deployment", "netpulse-gateway"))
}

// Installed in another namespace, the configurations and bindings follow it.
func TestOtherNamespace(t *testing.T) {
	bin, chart := helm(t)
	out, err := Template(bin, chart, nil, "--namespace", "observability")
	require.NoError(t, err)
	objs, err := Decode(out)
	require.NoError(t, err)
	for _, o := range objs {
		if ns, ok := nested(o, "metadata", "namespace").(string); ok {
			require.Equal(t, "observability", ns, "%s %s", o["kind"], nested(o, "metadata", "name"))
		}
	}
	acfg := configOf(t, objs, "netpulse-agent-config", "agent.yaml")
	require.Equal(t, "${env:NETPULSE_GATEWAY_ENDPOINT:-netpulse-gateway.observability.svc:4317}", nested(acfg, "exporters", "otlp_grpc", "endpoint"))
	gcfg := configOf(t, objs, "netpulse-gateway-config", "gateway.yaml")
	require.Equal(t, []any{"observability/netpulse-agent"}, nested(gcfg, "extensions", "k8s_token_auth", "service_accounts"))
	crb := mustFind(t, objs, "ClusterRoleBinding", "netpulse-gateway")
	require.Equal(t, "observability", nested(crb["subjects"].([]any)[0].(map[string]any), "namespace"))
}

// Sidecars in workload namespaces report their declared checks to the gateway's OTLP port
// (#28 item 12): the NetworkPolicy admits them only when the user names their namespaces,
// and only pods carrying the sidecar label; by default only agents.
func TestNetworkPolicyAdmitsSidecarsWhenAsked(t *testing.T) {
	from := func(objs []Object) []any {
		ingress := nested(mustFind(t, objs, "NetworkPolicy", "netpulse-gateway"), "spec", "ingress").([]any)
		return ingress[0].(map[string]any)["from"].([]any)
	}
	def := from(render(t, nil))
	require.Len(t, def, 1, "by default only the agents reach the OTLP port")
	require.Equal(t, map[string]any{"app.kubernetes.io/name": "netpulse-agent"}, nested(def[0].(map[string]any), "podSelector", "matchLabels"))

	sel := map[string]any{"matchLabels": map[string]any{"netpulse.io/checks": "enabled"}}
	got := from(render(t, map[string]any{"networkPolicy": map[string]any{"sidecarNamespaceSelector": sel}}))
	require.Len(t, got, 2)
	require.Equal(t, sel, got[1].(map[string]any)["namespaceSelector"])
	require.Equal(t, map[string]any{"netpulse.io/sidecar": "true"}, nested(got[1].(map[string]any), "podSelector", "matchLabels"))
}

// The gateway's metrics ports (8888 telemetry, 8889 per-pair metrics: every pair's
// reachability, a map of the cluster's pods) admit only the monitoring selector (issue 40,
// item 5): by default the pods of the namespace named monitoring; networkPolicy.metrics
// names another namespace, or a namespaceSelector that replaces it, and a podSelector. The
// OTLP port stays the agents', the health check port open (kubelet probes).
func TestNetworkPolicyMetricsOnlyFromMonitoring(t *testing.T) {
	ingress := func(objs []Object) []map[string]any {
		var out []map[string]any
		for _, r := range nested(mustFind(t, objs, "NetworkPolicy", "netpulse-gateway"), "spec", "ingress").([]any) {
			out = append(out, r.(map[string]any))
		}
		return out
	}
	ports := func(rule map[string]any) []any {
		var out []any
		for _, p := range rule["ports"].([]any) {
			out = append(out, p.(map[string]any)["port"])
		}
		return out
	}
	def := ingress(render(t, nil))
	require.Len(t, def, 3)
	require.Equal(t, []any{float64(4317)}, ports(def[0]))
	require.Equal(t, []any{float64(8888), float64(8889)}, ports(def[1]), "the metrics ports have their own rule")
	require.Equal(t, []any{map[string]any{
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}},
		"podSelector":       map[string]any{},
	}}, def[1]["from"], "by default the metrics ports admit the monitoring namespace only")
	require.Equal(t, []any{float64(13133)}, ports(def[2]))
	require.NotContains(t, def[2], "from", "the health check stays open")
	for i, r := range def[:2] {
		require.NotEmpty(t, r["from"], "ingress rule %d open to every pod", i)
	}

	// Another namespace by name.
	got := ingress(render(t, map[string]any{"networkPolicy": map[string]any{"metrics": map[string]any{"namespace": "observability"}}}))
	require.Equal(t, map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "observability"}},
		got[1]["from"].([]any)[0].(map[string]any)["namespaceSelector"])
	// A namespaceSelector replaces the name (no merge with the default's label) and a
	// podSelector narrows to the Prometheus pods.
	nsSel := map[string]any{"matchLabels": map[string]any{"team": "observability"}}
	podSel := map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "prometheus"}}
	got = ingress(render(t, map[string]any{"networkPolicy": map[string]any{"metrics": map[string]any{"namespaceSelector": nsSel, "podSelector": podSel}}}))
	require.Equal(t, []any{map[string]any{"namespaceSelector": nsSel, "podSelector": podSel}}, got[1]["from"])
	// No name and no selector: every namespace (the old behaviour, asked for).
	got = ingress(render(t, map[string]any{"networkPolicy": map[string]any{"metrics": map[string]any{"namespace": ""}}}))
	require.Equal(t, []any{map[string]any{"namespaceSelector": map[string]any{}, "podSelector": map[string]any{}}}, got[1]["from"])
}

// gatewayAdmissionPolicy renders the ValidatingAdmissionPolicy and its binding by default
// (their effect on the API server: integrationtest.TestGatewayAdmissionPolicy), naming the
// gateway's ServiceAccount in the release namespace, netpulse's condition types from the
// merged gateway configuration (the node condition type, the degraded type when set, the
// readiness gate's type) and the leader label.
func TestTemplateGatewayAdmissionPolicy(t *testing.T) {
	policy := func(objs []Object) (user, types, leader string) {
		t.Helper()
		p := mustFind(t, objs, "ValidatingAdmissionPolicy", "netpulse-gateway-writes")
		b := mustFind(t, objs, "ValidatingAdmissionPolicyBinding", "netpulse-gateway-writes")
		require.Equal(t, "netpulse-gateway-writes", nested(b, "spec", "policyName"))
		require.Equal(t, []any{"Deny"}, nested(b, "spec", "validationActions"))
		require.Equal(t, "Fail", nested(p, "spec", "failurePolicy"))
		user = nested(p, "spec", "matchConditions").([]any)[0].(map[string]any)["expression"].(string)
		for _, v := range nested(p, "spec", "variables").([]any) {
			switch v := v.(map[string]any); v["name"] {
			case "types":
				types = v["expression"].(string)
			case "leaderLabel":
				leader = v["expression"].(string)
			}
		}
		return user, types, leader
	}
	def := podnetworkhealthexporter.NewFactory().CreateDefaultConfig().(*podnetworkhealthexporter.Config)
	user, types, leader := policy(render(t, nil))
	require.Equal(t, `request.userInfo.username == "system:serviceaccount:netpulse:netpulse-gateway"`, user)
	// The gray condition's documented name is always allowed (turned on in gateway.config
	// it needs no policy change; docs/gray.md).
	require.Equal(t, `["`+def.NodeConditions.Type+`","netpulse.io/PodNetworkDegraded","`+def.ReadinessGate.ConditionType+`"]`, types, "the exporter's default types")
	require.Equal(t, `"netpulse.io/gateway-leader"`, leader, "the shipped gateway.yaml's leader label")

	user, types, _ = policy(render(t, map[string]any{"gateway": map[string]any{"config": map[string]any{"exporters": map[string]any{"pod_network_health": map[string]any{
		"node_conditions": map[string]any{"type": "example.com/NetworkProblem", "degraded_type": "example.com/NetworkDegraded"},
		"readiness_gate":  map[string]any{"condition_type": "example.com/network-ready"},
	}}}}}, "--namespace", "observability"))
	require.Equal(t, `request.userInfo.username == "system:serviceaccount:observability:netpulse-gateway"`, user)
	require.Equal(t, `["example.com/NetworkProblem","netpulse.io/PodNetworkDegraded","example.com/NetworkDegraded","example.com/network-ready"]`, types)
}

// readinessGate.inject renders the MutatingAdmissionPolicy and its binding (their effect
// on the API server: TestReadinessGateInjection): off by default; refused without the
// readiness condition's writer, whose condition type it injects (the exporter's default,
// or gateway.config's condition_type); the release namespace excluded; the namespace
// labels, failure policy and API version as given.
func TestTemplateReadinessGateInjection(t *testing.T) {
	for _, o := range render(t, nil) {
		require.NotContains(t, []string{"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}, o["kind"], "rendered by default")
	}
	out, err := runHelm(t, "template", "netpulse", repoPath(t, ChartPath), "--set", "readinessGate.inject.enabled=true")
	require.Error(t, err, "injection without the writer was accepted")
	require.Contains(t, out, "readinessGate.inject.enabled needs the readiness condition's writer")

	// The writer switched off in gateway.config while readinessGate.enabled stays on: still refused.
	out, err = runHelm(t, "template", "netpulse", repoPath(t, ChartPath), "--set", "readinessGate.enabled=true", "--set", "readinessGate.inject.enabled=true",
		"--set", "gateway.config.exporters.pod_network_health.readiness_gate.enabled=false")
	require.Error(t, err, "injection with the writer off in gateway.config was accepted")
	require.Contains(t, out, "readinessGate.inject.enabled needs the readiness condition's writer")

	exporterDefault := podnetworkhealthexporter.NewFactory().CreateDefaultConfig().(*podnetworkhealthexporter.Config).ReadinessGate.ConditionType
	injected := func(objs []Object) string {
		t.Helper()
		p := mustFind(t, objs, "MutatingAdmissionPolicy", "netpulse-readiness-gate")
		cond := nested(p, "spec", "matchConditions").([]any)[0].(map[string]any)["expression"].(string)
		patch := nested(p, "spec", "mutations").([]any)[0].(map[string]any)
		expr := nested(patch, "jsonPatch", "expression").(string)
		m := regexp.MustCompile(`conditionType == "([^"]+)"`).FindStringSubmatch(cond)
		require.NotNil(t, m, cond)
		require.Equal(t, 2, strings.Count(expr, `"`+m[1]+`"`), "both branches of the patch add the type the match condition checks:\n%s", expr)
		return m[1]
	}

	objs := render(t, injectValues(nil))
	require.Equal(t, exporterDefault, injected(objs), "the chart's default condition type is the exporter's")
	require.Equal(t, "5m", nested(configOf(t, objs, "netpulse-gateway-config", "gateway.yaml"), "exporters", "pod_network_health", "readiness_gate", "fail_open_timeout"),
		"fail-open on by default")
	p := mustFind(t, objs, "MutatingAdmissionPolicy", "netpulse-readiness-gate")
	require.Equal(t, "admissionregistration.k8s.io/v1", p["apiVersion"])
	require.Equal(t, "Ignore", nested(p, "spec", "failurePolicy"))
	require.Equal(t, []any{map[string]any{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": []any{"netpulse", "kube-system"}}},
		nested(p, "spec", "matchConstraints", "namespaceSelector", "matchExpressions"), "never the release namespace nor kube-system")
	require.Equal(t, []any{map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"pods"}}},
		nested(p, "spec", "matchConstraints", "resourceRules"))
	b := mustFind(t, objs, "MutatingAdmissionPolicyBinding", "netpulse-readiness-gate")
	require.Equal(t, "netpulse-readiness-gate", nested(b, "spec", "policyName"))
	require.Equal(t, map[string]any{"netpulse.io/readiness-gate": "enabled"}, nested(b, "spec", "matchResources", "namespaceSelector", "matchLabels"))

	// The exporter's condition type from gateway.config, in the policy and the configuration alike.
	values := injectValues(map[string]any{"namespaceLabels": map[string]any{"example.com/net": "gated"}, "failurePolicy": "Fail", "apiVersion": "admissionregistration.k8s.io/v1beta1"})
	values["gateway"] = map[string]any{"config": map[string]any{"exporters": map[string]any{"pod_network_health": map[string]any{
		"readiness_gate": map[string]any{"condition_type": "example.com/network-ready"}}}}}
	bin, chart := helm(t)
	rendered, err := Template(bin, chart, values, "--namespace", "observability")
	require.NoError(t, err)
	objs, err = Decode(rendered)
	require.NoError(t, err)
	require.Equal(t, "example.com/network-ready", injected(objs))
	require.Equal(t, "example.com/network-ready", nested(configOf(t, objs, "netpulse-gateway-config", "gateway.yaml"), "exporters", "pod_network_health", "readiness_gate", "condition_type"))
	p = mustFind(t, objs, "MutatingAdmissionPolicy", "netpulse-readiness-gate")
	require.Equal(t, "admissionregistration.k8s.io/v1beta1", p["apiVersion"])
	require.Equal(t, "Fail", nested(p, "spec", "failurePolicy"))
	require.Equal(t, []any{"observability", "kube-system"}, nested(p, "spec", "matchConstraints", "namespaceSelector", "matchExpressions").([]any)[0].(map[string]any)["values"])
	b = mustFind(t, objs, "MutatingAdmissionPolicyBinding", "netpulse-readiness-gate")
	require.Equal(t, "admissionregistration.k8s.io/v1beta1", b["apiVersion"])
	require.Equal(t, map[string]any{"example.com/net": "gated", "netpulse.io/readiness-gate": "enabled"}, nested(b, "spec", "matchResources", "namespaceSelector", "matchLabels"),
		"Helm merges the given labels with the default's")
}

// The agent's GOMEMLIMIT follows its memory limit (less 24 MiB, at least half of it)
// unless agent.goMemLimit is set, and is not set without a limit; a limit the chart cannot
// read is refused.
func TestAgentGoMemLimitFollowsTheMemoryLimit(t *testing.T) {
	goMemLimit := func(values map[string]any) (string, bool) {
		t.Helper()
		ds := mustFind(t, render(t, values), "DaemonSet", "netpulse-agent")
		env, _ := container(t, ds)["env"].([]any)
		for _, e := range env {
			if m := e.(map[string]any); m["name"] == "GOMEMLIMIT" {
				return m["value"].(string), true
			}
		}
		return "", false
	}
	agent := func(a map[string]any) map[string]any { return map[string]any{"agent": a} }
	limit := func(l string) map[string]any {
		return agent(map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": l}}})
	}
	for _, c := range []struct {
		values map[string]any
		want   string
	}{
		{nil, "72MiB"}, // the default limit, 96Mi
		{limit("128Mi"), "104MiB"},
		{limit("1Gi"), "1000MiB"},
		{limit("32Mi"), "16MiB"},
		{agent(map[string]any{"goMemLimit": "40MiB"}), "40MiB"},
	} {
		got, ok := goMemLimit(c.values)
		require.True(t, ok, "%v: no GOMEMLIMIT", c.values)
		require.Equal(t, c.want, got, "%v", c.values)
	}
	_, ok := goMemLimit(agent(map[string]any{"resources": map[string]any{"limits": nil}})) // null removes the default
	require.False(t, ok, "GOMEMLIMIT without a memory limit")

	_, chart := helm(t)
	out, err := runHelm(t, "template", "netpulse", chart, "--set", "agent.resources.limits.memory=67108864")
	require.Error(t, err)
	require.Contains(t, out, "agent.goMemLimit")
}

// The gateway's GOMEMLIMIT follows its memory limit (25/32 of it: 400MiB at the default
// 512Mi, as deploy/ ships) unless gateway.goMemLimit is set, on every shard, and is not set
// without a limit; a limit the chart cannot read is refused with the gateway's key.
func TestGatewayGoMemLimitFollowsTheMemoryLimit(t *testing.T) {
	goMemLimits := func(values map[string]any) []string {
		t.Helper()
		var out []string
		for _, o := range render(t, values) {
			if o["kind"] != "Deployment" {
				continue
			}
			env, _ := container(t, o)["env"].([]any)
			for _, e := range env {
				if m := e.(map[string]any); m["name"] == "GOMEMLIMIT" {
					out = append(out, m["value"].(string))
				}
			}
		}
		return out
	}
	gateway := func(g map[string]any) map[string]any { return map[string]any{"gateway": g} }
	limit := func(l string) map[string]any {
		return gateway(map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": l}}})
	}
	for _, c := range []struct {
		values map[string]any
		want   string
	}{
		{nil, "400MiB"}, // the default limit, 512Mi
		{limit("1Gi"), "800MiB"},
		{limit("2Gi"), "1600MiB"},
		{limit("768Mi"), "600MiB"},
		{gateway(map[string]any{"goMemLimit": "700MiB"}), "700MiB"},
	} {
		require.Equal(t, []string{c.want}, goMemLimits(c.values), "%v", c.values)
	}
	sharded := gateway(map[string]any{"shards": 3, "resources": map[string]any{"limits": map[string]any{"memory": "1Gi"}}})
	require.Equal(t, []string{"800MiB", "800MiB", "800MiB"}, goMemLimits(sharded), "every shard's Deployment")
	require.Empty(t, goMemLimits(gateway(map[string]any{"resources": map[string]any{"limits": nil}})), "GOMEMLIMIT without a memory limit")

	_, chart := helm(t)
	out, err := runHelm(t, "template", "netpulse", chart, "--set", "gateway.resources.limits.memory=536870912")
	require.Error(t, err)
	require.Contains(t, out, "gateway.goMemLimit")
}
