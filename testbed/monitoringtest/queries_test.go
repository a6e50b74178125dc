// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package monitoringtest

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/netpulse/netpulse/internal/contract"
)

// catalogue maps every series name a Prometheus gets from a netpulse gateway to the label
// names its series can carry.
type catalogue map[string]map[string]bool

func (c catalogue) add(name string, ls ...string) {
	if c[name] == nil {
		c[name] = map[string]bool{}
	}
	for _, l := range ls {
		c[name][l] = true
	}
}

func promName(otel string) string { return strings.ReplaceAll(otel, ".", "_") }

// exportedSeries builds the catalogue from what the collector actually exports:
//   - the gateway's export path, scraped from the built collector running it (every
//     pod_probe metric family, including the error counter of a refused probe), plus the
//     labels k8s_net_attributes adds at the gateway (the source's zone, region and workload
//     on the Resource; the target's identity under destination.), which need a cluster;
//   - pod_network_health's self-telemetry, from its mdatagen metadata.yaml named as the
//     collector's internal telemetry names it (otelcol_ + name, attributes with dots as
//     underscores, no unit or _total suffix), checked against the same collector's real
//     telemetry scrape for every series that scrape has;
//   - the labels Prometheus adds (job, instance).
func exportedSeries(t *testing.T) catalogue {
	t.Helper()
	tg := startTargets(t)
	col := startCollector(t, tg, fmt.Sprintf("http://127.0.0.1:%d", freePort(t)), "catalogue", true)
	waitHTTP(t, col.proc, col.exportURL)
	wantFamilies := []string{
		"netpulse_probe_status_ratio", "netpulse_probe_loss_ratio", "netpulse_probe_icmp_jitter_seconds",
		"netpulse_probe_packets_sent_total", "netpulse_probe_packets_lost_total", "netpulse_probe_errors_total",
		"netpulse_probe_duration_seconds_bucket", "netpulse_probe_duration_seconds_sum", "netpulse_probe_duration_seconds_count",
		"netpulse_probe_path_mtu_bytes",
	}
	var export, telem []sample
	eventually(t, 60*time.Second, "every pod_probe family and pod_network_health's telemetry scraped", func() (bool, string) {
		var err error
		if export, err = scrape(col.exportURL); err != nil {
			return false, err.Error()
		}
		if telem, err = scrape(col.telemURL); err != nil {
			return false, err.Error()
		}
		have := map[string]bool{}
		for _, s := range append(slices.Clone(export), telem...) {
			have[s.name] = true
		}
		var missing []string
		for _, n := range append(wantFamilies, "otelcol_pod_network_health_observer_reporting", "otelcol_pod_network_health_is_leader") {
			if !have[n] {
				missing = append(missing, n)
			}
		}
		return len(missing) == 0, "missing " + strings.Join(missing, ", ")
	})

	c := catalogue{}
	for _, s := range export {
		if !strings.HasPrefix(s.name, "netpulse_") {
			continue
		}
		c.add(s.name, slices.Collect(maps.Keys(s.labels))...)
	}
	require.ElementsMatch(t, wantFamilies, slices.Collect(maps.Keys(c)), "the export path's series names")
	var gateway []string
	for _, k := range []string{contract.CloudZone, contract.CloudRegion, contract.K8sDeploymentName, contract.K8sDaemonSetName,
		contract.K8sStatefulSetName, contract.K8sReplicaSetName, contract.K8sJobName, contract.K8sCronJobName} {
		gateway = append(gateway, promName(k))
	}
	for _, k := range []string{contract.K8sPodName, contract.K8sPodUID, contract.K8sNamespaceName, contract.K8sNodeName,
		contract.K8sDeploymentName, contract.K8sDaemonSetName, contract.K8sStatefulSetName, contract.K8sReplicaSetName,
		contract.K8sJobName, contract.K8sCronJobName, contract.CloudZone, contract.CloudRegion} {
		gateway = append(gateway, promName(contract.DestinationPrefix+k))
	}
	for name := range c {
		c.add(name, gateway...)
	}

	// pod_network_health's telemetry, from its metadata.
	raw, err := os.ReadFile(repoPath(t, "exporter", "podnetworkhealthexporter", "metadata.yaml"))
	require.NoError(t, err)
	var md struct {
		Telemetry struct {
			Metrics map[string]struct {
				Attributes []string `yaml:"attributes"`
			} `yaml:"metrics"`
		} `yaml:"telemetry"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &md))
	require.NotEmpty(t, md.Telemetry.Metrics)
	derived := catalogue{}
	for name, m := range md.Telemetry.Metrics {
		var ls []string
		for _, a := range m.Attributes {
			ls = append(ls, promName(a))
		}
		derived.add("otelcol_"+promName(name), ls...)
	}
	seen := 0
	for _, s := range telem {
		if !strings.HasPrefix(s.name, "otelcol_pod_network_health_") {
			continue
		}
		seen++
		want, ok := derived[s.name]
		require.Truef(t, ok, "scraped %s is not what metadata.yaml's telemetry derives to", s.name)
		for l := range s.labels {
			require.Truef(t, want[l], "scraped %s has label %s that metadata.yaml does not derive", s.name, l)
		}
		for l := range want {
			_, has := s.labels[l]
			require.Truef(t, has, "scraped %s lacks the derived label %s", s.name, l)
		}
	}
	require.GreaterOrEqual(t, seen, 3, "the naming rule must be checked against real series")
	for name, ls := range derived {
		c.add(name, slices.Collect(maps.Keys(ls))...)
	}
	for name := range c {
		c.add(name, "job", "instance")
	}
	return c
}

// external are series of other exporters that a rule may use, with their labels (none: every
// rule reads what the collector exports).
var external = catalogue{}

var promqlParser = parser.NewParser(parser.Options{})

// checkExpr parses expr and checks every metric it selects and every label it names (in
// matchers and by/without clauses) against cat; it returns the labels the result can carry.
func checkExpr(cat catalogue, expr string) (map[string]bool, error) {
	e, err := promqlParser.ParseExpr(expr)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", expr, err)
	}
	var errs []string
	selLabels := func(n parser.Node) map[string]bool {
		out := map[string]bool{}
		parser.Inspect(n, func(node parser.Node, _ []parser.Node) error {
			if vs, ok := node.(*parser.VectorSelector); ok {
				for l := range cat[selectorName(vs)] {
					out[l] = true
				}
			}
			return nil
		})
		return out
	}
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			name := selectorName(n)
			ls, ok := cat[name]
			if !ok {
				errs = append(errs, fmt.Sprintf("metric %q is not exported", name))
				return nil
			}
			for _, m := range n.LabelMatchers {
				if m.Name != model.MetricNameLabel && !ls[m.Name] {
					errs = append(errs, fmt.Sprintf("%s has no label %q", name, m.Name))
				}
			}
		case *parser.AggregateExpr:
			inner := selLabels(n.Expr)
			for _, l := range n.Grouping {
				if !inner[l] {
					errs = append(errs, fmt.Sprintf("%s by/without label %q that none of its series has", n.Op, l))
				}
			}
		}
		return nil
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("%q: %s", expr, strings.Join(errs, "; "))
	}
	return selLabels(e), nil
}

func selectorName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

var (
	grafanaVar  = regexp.MustCompile(`\$\{?(\w+)(?::\w+)?\}?`)
	legendLabel = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)
	ruleLabel   = regexp.MustCompile(`\$labels\.(\w+)`)
	labelValues = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)
)

// grafanaExpr replaces Grafana's variables by values PromQL can parse.
func grafanaExpr(expr string) string {
	return grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		if strings.Contains(v, "__rate_interval") || strings.Contains(v, "__interval") || strings.Contains(v, "__range") {
			return "5m"
		}
		return "x"
	})
}

// Every query of the Grafana dashboard and of the alert rules names only metrics and labels
// the collector exports (legends and alert templates included).
func TestDashboardAndRulesNameExportedSeries(t *testing.T) {
	cat := exportedSeries(t)

	raw, err := os.ReadFile(repoPath(t, "deploy", "monitoring", "dashboard.json"))
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr   string `json:"expr"`
				Legend string `json:"legendFormat"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	queries := 0
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		require.NotEmptyf(t, p.Targets, "panel %q has no query", p.Title)
		for _, tg := range p.Targets {
			ls, err := checkExpr(cat, grafanaExpr(tg.Expr))
			require.NoErrorf(t, err, "panel %q", p.Title)
			for _, m := range legendLabel.FindAllStringSubmatch(tg.Legend, -1) {
				require.Truef(t, ls[m[1]], "panel %q: legend label %q is not on its series", p.Title, m[1])
			}
			queries++
		}
	}
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		m := labelValues.FindStringSubmatch(fmt.Sprint(q["query"]))
		require.NotNilf(t, m, "variable %s: label_values(selector, label) expected", v.Name)
		ls, err := checkExpr(cat, m[1])
		require.NoErrorf(t, err, "variable %s", v.Name)
		require.Truef(t, ls[m[2]], "variable %s: label %q", v.Name, m[2])
		queries++
	}
	require.GreaterOrEqual(t, queries, 20)

	// The alert rules too, with kube-state-metrics' node condition allowed.
	for name, ls := range external {
		cat.add(name, slices.Collect(maps.Keys(ls))...)
	}
	raw, err = os.ReadFile(repoPath(t, "deploy", "monitoring", "rules.yaml"))
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &rules))
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			ls, err := checkExpr(cat, r.Expr)
			require.NoErrorf(t, err, "alert %s", r.Alert)
			for _, a := range r.Annotations {
				for _, m := range ruleLabel.FindAllStringSubmatch(a, -1) {
					require.Truef(t, ls[m[1]], "alert %s: annotation uses $labels.%s, not on its series", r.Alert, m[1])
				}
			}
			n++
		}
	}
	require.Equal(t, 15, n)

	// The check can fail: a made-up label or metric is refused.
	_, err = checkExpr(cat, `sum by (no_such_label) (netpulse_probe_status_ratio)`)
	require.Error(t, err)
	_, err = checkExpr(cat, `netpulse_probe_status{network_type="ipv4"}`)
	require.Error(t, err, "the OTel name without the exporter's unit suffix is not what Prometheus sees")
	_, err = checkExpr(cat, `otelcol_pod_network_health_target_reachable{netpulse_observer_name="x"}`)
	require.Error(t, err)
}
