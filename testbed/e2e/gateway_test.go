// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netpulse/netpulse/testbed/simcluster"
)

// promSample is one line of a Prometheus text exposition.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads a Prometheus text endpoint (the collector's own telemetry or its prometheus
// exporter). Comment lines are skipped; label values here never hold escaped quotes.
func scrape(ctx context.Context, url string) ([]promSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	var out []promSample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", url, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseSample(line string) (promSample, error) {
	s := promSample{labels: map[string]string{}}
	rest := line
	if i := strings.IndexAny(line, "{ "); i >= 0 && line[i] == '{' {
		s.name = line[:i]
		end := strings.LastIndexByte(line, '}')
		if end < i {
			return s, fmt.Errorf("unterminated labels: %q", line)
		}
		for body := line[i+1 : end]; body != ""; {
			eq := strings.IndexByte(body, '=')
			if eq < 0 || eq+1 >= len(body) || body[eq+1] != '"' {
				return s, fmt.Errorf("bad label in %q", line)
			}
			q := strings.IndexByte(body[eq+2:], '"')
			if q < 0 {
				return s, fmt.Errorf("bad label value in %q", line)
			}
			s.labels[strings.TrimSpace(body[:eq])] = body[eq+2 : eq+2+q]
			body = strings.TrimPrefix(body[eq+2+q+1:], ",")
		}
		rest = line[end+1:]
	} else {
		f := strings.Fields(line)
		s.name, rest = f[0], strings.Join(f[1:], " ")
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return s, fmt.Errorf("no value: %q", line)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, fmt.Errorf("value of %q: %w", line, err)
	}
	s.value = v
	return s, nil
}

// Where the gateway slot serves its own telemetry (gateway.yaml: POD_IP:8888) and its
// prometheus exporter (POD_IP:8889).
var (
	gatewayTelemetryURL = "http://" + net.JoinHostPort(simcluster.HostIPv4.String(), "8888") + "/metrics"
	gatewayExportURL    = "http://" + net.JoinHostPort(simcluster.HostIPv4.String(), "8889") + "/metrics"
)

// family returns the samples whose metric name starts with prefix (the exporter may add a
// unit or _total suffix).
func family(all []promSample, prefix string) []promSample {
	var out []promSample
	for _, s := range all {
		if strings.HasPrefix(s.name, prefix) {
			out = append(out, s)
		}
	}
	return out
}

func sum(samples []promSample) float64 {
	var t float64
	for _, s := range samples {
		t += s.value
	}
	return t
}

// gatewayChecker judges the parts of an expectation that the gateway's own telemetry
// carries: the per-target verdict gauge (pod_network_health_target_reachable, one series per
// target and address family) and the per-observer gauge
// (pod_network_health_observer_reporting).
type gatewayChecker struct{}

func (gatewayChecker) name() string { return "gateway-telemetry" }

const (
	metricTargetReachable   = "otelcol_pod_network_health_target_reachable"
	metricObserverReporting = "otelcol_pod_network_health_observer_reporting"
	metricAPIWrites         = "otelcol_pod_network_health_api_writes"
)

// relevant: the expectation says something about targets or observers.
func (gatewayChecker) relevant(exp *expectation) bool {
	return len(exp.targetReachable) > 0 || exp.targetsOthers || len(exp.observerReporting) > 0
}

func (g gatewayChecker) check(exp *expectation) (bool, string, error) {
	if !g.relevant(exp) {
		return true, "", nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	all, err := scrape(ctx, gatewayTelemetryURL)
	if err != nil {
		return false, err.Error(), nil
	}
	var pending []string
	// Per target (pod) node: the values of every address family.
	targets := map[string][]float64{}
	for _, s := range family(all, metricTargetReachable) {
		if s.labels["netpulse_target_kind"] == "Pod" {
			n := s.labels["netpulse_target_node"]
			targets[n] = append(targets[n], s.value)
		}
	}
	for _, a := range exp.agents {
		vals := targets[a.Node]
		want, listed := exp.targetReachable[a.Node]
		if !listed && !exp.targetsOthers {
			continue
		}
		if !listed {
			if slices.Contains(vals, 0) {
				return false, "", fmt.Errorf("target %s (node %s) judged Unreachable (%v), but only %v may be",
					a.Pod, a.Node, vals, slices.Sorted(maps.Keys(exp.targetReachable)))
			}
			want = true
		}
		wantV := 0.0
		if want {
			wantV = 1
		}
		if len(vals) == 0 || slices.ContainsFunc(vals, func(v float64) bool { return v != wantV }) {
			pending = append(pending, fmt.Sprintf("target on %s: reachable gauge %v, want %v", a.Node, vals, wantV))
		}
	}
	observers := map[string]float64{}
	for _, s := range family(all, metricObserverReporting) {
		observers[s.labels["netpulse_observer_node"]] = s.value
	}
	for node, want := range exp.observerReporting {
		v, ok := observers[node]
		wantV := 0.0
		if want {
			wantV = 1
		}
		if !ok || v != wantV {
			pending = append(pending, fmt.Sprintf("observer on %s: reporting gauge %v (present %v), want %v", node, v, ok, wantV))
		}
	}
	if len(pending) > 0 {
		if len(pending) > 6 {
			pending = append(pending[:6], fmt.Sprintf("... and %d more", len(pending)-6))
		}
		return false, strings.Join(pending, "; "), nil
	}
	return true, "", nil
}
