// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package monitoringtest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/netpulse/netpulse/testbed/disttest"
)

// injectedDelay is what the slow HTTP target waits before it answers: the probe duration
// the RTT histogram must report.
const injectedDelay = 40 * time.Millisecond

// targets are what the collectors probe on loopback: ICMP echo of 127.0.0.1 (tens of
// microseconds), an HTTP server that answers after injectedDelay, and a closed TCP port (a
// refused probe, so the error counter exists too).
type targets struct {
	slowURL    string
	closedPort int
}

func startTargets(t testing.TB) targets {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(injectedDelay):
		case <-r.Context().Done():
		}
		_, _ = w.Write([]byte("ok"))
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return targets{slowURL: "http://" + l.Addr().String() + "/", closedPort: freePort(t)}
}

// collector is a running otelcol-netpulse with a gateway-like export path.
type collector struct {
	proc      *process
	exportURL string // its prometheus exporter
	telemURL  string // its internal telemetry
	exportJob string // the Prometheus job scraping exportURL
	viaLabel  string // the external label value on what it remote-writes
}

// startCollector runs the built distribution: pod_probe probes the targets every second;
// metrics/health feeds pod_network_health (its Kubernetes API is unreachable: it judges and
// reports its self-telemetry all the same); metrics/export is the gateway's export
// pipeline as shipped in gateway.yaml (less k8s_net_attributes, which needs a cluster; less
// explicit_buckets when convert is false) into the prometheus exporter and
// prometheus_remote_write towards promURL.
func startCollector(t testing.TB, tg targets, promURL, name string, convert bool) *collector {
	t.Helper()
	procs, export := gatewayExport(t)
	require.Contains(t, export, "explicit_buckets", "gateway.yaml: metrics/export must convert the RTT histogram to classic buckets")
	var pipeline []string
	processors := map[string]any{}
	for _, p := range export {
		if p == "k8s_net_attributes" || (p == "explicit_buckets" && !convert) {
			continue
		}
		pipeline = append(pipeline, p)
		processors[p] = procs[p]
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "unreachable.kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	exportPort, telemPort := freePort(t), freePort(t)
	c := &collector{
		exportURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", exportPort),
		telemURL:  fmt.Sprintf("http://127.0.0.1:%d/metrics", telemPort),
		exportJob: name,
		viaLabel:  "remote_write_" + name,
	}
	cfg := map[string]any{
		"receivers": map[string]any{"pod_probe": map[string]any{
			"auth_type": "kubeConfig", "kubeconfig": kubeconfig,
			"interval": "1s", "timeout": "500ms", "allow_loopback": true,
			"peers": map[string]any{"enabled": false},
			// Path-MTU probes of the static address, so that their series is exported too.
			"icmp": map[string]any{"path_mtu": map[string]any{"enabled": true, "every": 1, "size": 1500}},
			"static": []any{
				map[string]any{"target": "127.0.0.1"},
				map[string]any{"target": tg.slowURL},
				map[string]any{"target": "127.0.0.1:" + strconv.Itoa(tg.closedPort)},
			},
		}},
		"processors": processors,
		"exporters": map[string]any{
			"pod_network_health": map[string]any{
				"auth_type": "kubeConfig", "kubeconfig": kubeconfig,
				"leader_election": map[string]any{"enabled": false},
			},
			"prometheus": map[string]any{
				"endpoint":                         fmt.Sprintf("127.0.0.1:%d", exportPort),
				"resource_to_telemetry_conversion": map[string]any{"enabled": true},
			},
			"prometheus_remote_write": map[string]any{
				"endpoint":                         promURL + "/api/v1/write",
				"resource_to_telemetry_conversion": map[string]any{"enabled": true},
				"external_labels":                  map[string]any{"netpulse_via": c.viaLabel},
				"target_info":                      map[string]any{"enabled": false},
				"retry_on_failure":                 map[string]any{"enabled": false},
			},
		},
		"service": map[string]any{
			"telemetry": map[string]any{"metrics": map[string]any{
				"level": "basic",
				"readers": []any{map[string]any{"pull": map[string]any{"exporter": map[string]any{"prometheus": map[string]any{
					"host": "127.0.0.1", "port": telemPort,
				}}}}},
			}},
			"pipelines": map[string]any{
				"metrics/health": map[string]any{"receivers": []string{"pod_probe"}, "exporters": []string{"pod_network_health"}},
				"metrics/export": map[string]any{"receivers": []string{"pod_probe"}, "processors": pipeline,
					"exporters": []string{"prometheus", "prometheus_remote_write"}},
			},
		},
	}
	raw, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	path := filepath.Join(dir, name+".yaml")
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	c.proc = start(t, disttest.Collector(t), []string{
		"POD_NAME=agent-" + name, "POD_UID=6f1c0e7a-0000-4000-8000-00000000000" + strconv.Itoa(len(name)%10),
		"POD_NAMESPACE=netpulse", "NODE_NAME=node-" + name, "POD_IPS=127.0.0.1",
	}, "--config", path)
	return c
}

// startPrometheus runs Debian's prometheus on a free loopback port with throw-away storage,
// no feature flags, and the remote-write receiver on; it scrapes each collector's export
// endpoint (job = the collector's name) and the first one's internal telemetry (job otelcol).
func startPrometheus(t testing.TB, port int, cols ...*collector) string {
	t.Helper()
	bin := need(t, "prometheus")
	var scrapes []any
	for i, c := range cols {
		scrapes = append(scrapes, map[string]any{"job_name": c.exportJob, "static_configs": []any{map[string]any{"targets": []string{hostPort(c.exportURL)}}}})
		if i == 0 {
			scrapes = append(scrapes, map[string]any{"job_name": "otelcol", "static_configs": []any{map[string]any{"targets": []string{hostPort(c.telemURL)}}}})
		}
	}
	cfg, err := yaml.Marshal(map[string]any{
		"global":         map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"scrape_configs": scrapes,
	})
	require.NoError(t, err)
	dir := t.TempDir()
	path := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(path, cfg, 0o600))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	p := start(t, bin, nil,
		"--config.file="+path,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+hostPort(base),
		"--web.enable-remote-write-receiver",
	)
	waitHTTP(t, p, base+"/-/ready")
	return base
}

func hostPort(u string) string {
	u = u[len("http://"):]
	if i := slices.Index([]byte(u), '/'); i >= 0 {
		return u[:i]
	}
	return u
}
