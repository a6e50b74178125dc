// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package monitoringtest

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A stock Prometheus 2.x (Debian's, no feature flags) gets a usable RTT histogram from the
// gateway's export path: histogram_quantile(0.99, ...) over the scraped classic buckets is
// finite and in the factor-of-two bucket holding the delay the harness injects; the same
// data remote-written into the same server keeps every series. A second collector without
// explicit_buckets reproduces issue #13 next to it, so the test is known to detect it:
// only a +Inf bucket (histogram_quantile is NaN) and every remote-written series refused.
func TestStockPrometheus(t *testing.T) {
	tg := startTargets(t)
	promPort := freePort(t)
	promURL := fmt.Sprintf("http://127.0.0.1:%d", promPort)
	gw := startCollector(t, tg, promURL, "netpulse", true)
	control := startCollector(t, tg, promURL, "control", false)
	prom := startPrometheus(t, promPort, gw, control)
	waitHTTP(t, gw.proc, gw.exportURL)
	waitHTTP(t, control.proc, control.exportURL)
	ctx := context.Background()

	p99 := func(job, probe string) string {
		return fmt.Sprintf(`histogram_quantile(0.99, sum by (le) (rate(netpulse_probe_duration_seconds_bucket{job=%q,netpulse_probe_type=%q}[20s])))`, job, probe)
	}
	one := func(expr string) (float64, bool, string) {
		r, err := query(ctx, prom, expr)
		if err != nil {
			return 0, false, err.Error()
		}
		if len(r) != 1 {
			return 0, false, fmt.Sprintf("%d results", len(r))
		}
		return r[0].Value, true, fmt.Sprint(r[0].Value)
	}

	t.Run("histogram_quantile on the scraped buckets", func(t *testing.T) {
		var http99, icmp99 float64
		eventually(t, 90*time.Second, "finite RTT p99 from the scrape", func() (bool, string) {
			var ok1, ok2 bool
			var m1, m2 string
			http99, ok1, m1 = one(p99(gw.exportJob, "http"))
			icmp99, ok2, m2 = one(p99(gw.exportJob, "icmp"))
			return ok1 && ok2 && finite(http99) && finite(icmp99), "http " + m1 + ", icmp " + m2
		})
		// The delay lies in (2^-5, 2^-4] s = (31.25, 62.5] ms: with one bucket per octave
		// histogram_quantile cannot place it more precisely than that bucket.
		lo, hi := math.Exp2(-5), math.Exp2(-4)
		require.Greater(t, injectedDelay.Seconds(), lo)
		require.LessOrEqual(t, injectedDelay.Seconds(), hi)
		require.Greaterf(t, http99, injectedDelay.Seconds(), "p99 of a %v probe", injectedDelay)
		require.LessOrEqualf(t, http99, hi, "p99 of a %v probe must stay in its bucket (%.4f, %.4f]", injectedDelay, lo, hi)
		// Loopback ICMP: tens of microseconds, resolved by the sub-millisecond buckets.
		require.Less(t, icmp99, math.Exp2(-10), "loopback echo p99 below ~1 ms")
		t.Logf("p99 HTTP (injected %v): %.2f ms; p99 ICMP loopback: %.1f µs", injectedDelay, http99*1e3, icmp99*1e6)

		// The issue, as a stock Prometheus sees the exponential histogram: one +Inf bucket.
		r, err := query(ctx, prom, fmt.Sprintf(`count by (le) (netpulse_probe_duration_seconds_bucket{job=%q})`, control.exportJob))
		require.NoError(t, err)
		var les []string
		for _, e := range r {
			les = append(les, e.Metric["le"])
		}
		require.Equal(t, []string{"+Inf"}, les, "the control exports the exponential histogram unconverted")
		v, ok, msg := one(p99(control.exportJob, "http"))
		require.Truef(t, !ok || math.IsNaN(v), "without conversion histogram_quantile has nothing to work with: %s", msg)
	})

	t.Run("remote write keeps every series", func(t *testing.T) {
		series := func(matcher string) (map[string]int, error) {
			r, err := query(ctx, prom, fmt.Sprintf(`count by (__name__) ({__name__=~"netpulse_.+",%s})`, matcher))
			if err != nil {
				return nil, err
			}
			out := map[string]int{}
			for _, e := range r {
				out[e.Metric["__name__"]] = int(e.Value)
			}
			return out, nil
		}
		var scraped, written map[string]int
		eventually(t, 60*time.Second, "the remote-written netpulse series match the scraped ones", func() (bool, string) {
			var err error
			if scraped, err = series(fmt.Sprintf("job=%q", gw.exportJob)); err != nil {
				return false, err.Error()
			}
			if written, err = series(fmt.Sprintf("netpulse_via=%q", gw.viaLabel)); err != nil {
				return false, err.Error()
			}
			return len(scraped) >= 7 && maps.Equal(scraped, written), fmt.Sprintf("scraped %v, remote-written %v", scraped, written)
		})
		names := slices.Sorted(maps.Keys(scraped))
		for _, n := range []string{"netpulse_probe_duration_seconds_bucket", "netpulse_probe_duration_seconds_count", "netpulse_probe_errors_total", "netpulse_probe_packets_sent_total"} {
			require.Contains(t, names, n)
		}
		t.Logf("remote write kept %d netpulse metric names, the same series counts as the scrape: %s", len(names), strings.Join(names, ", "))

		// Every series, label for label (less the labels each path adds; le compared as a
		// number: the prometheus exporter writes 6.103515625e-05 where remote write says
		// 0.00006103515625, and Prometheus 2.x stores le as it comes).
		keys := func(matcher string, drop ...string) map[string]bool {
			r, err := query(ctx, prom, fmt.Sprintf(`{__name__=~"netpulse_.+",%s}`, matcher))
			require.NoError(t, err)
			out := map[string]bool{}
			for _, e := range r {
				for _, d := range drop {
					delete(e.Metric, d)
				}
				if le, ok := e.Metric["le"]; ok {
					f, err := strconv.ParseFloat(le, 64)
					require.NoError(t, err)
					e.Metric["le"] = strconv.FormatFloat(f, 'g', -1, 64)
				}
				out[fmt.Sprint(e.Metric)] = true
			}
			return out
		}
		sk := keys(fmt.Sprintf("job=%q", gw.exportJob), "job", "instance")
		wk := keys(fmt.Sprintf("netpulse_via=%q", gw.viaLabel), "netpulse_via", "job", "instance")
		for k := range sk {
			require.Truef(t, wk[k], "scraped series %s is missing from remote write", k)
		}

		// The collector saw no refusal ...
		telem, err := scrape(gw.telemURL)
		require.NoError(t, err)
		var sent, failed float64
		for _, s := range telem {
			if s.labels["exporter"] != "prometheus_remote_write" {
				continue
			}
			switch s.name {
			case "otelcol_exporter_sent_metric_points":
				sent += s.value
			case "otelcol_exporter_send_failed_metric_points":
				failed += s.value
			}
		}
		require.Positive(t, sent)
		require.Zero(t, failed, "points the remote-write exporter could not send")

		// ... while the control's requests, carrying a native histogram, were refused whole.
		eventually(t, 30*time.Second, "the control's remote write refused", func() (bool, string) {
			s, err := scrape(control.telemURL)
			if err != nil {
				return false, err.Error()
			}
			for _, x := range s {
				if x.name == "otelcol_exporter_send_failed_metric_points" && x.labels["exporter"] == "prometheus_remote_write" && x.value > 0 {
					return true, ""
				}
			}
			return false, "no failed points yet"
		})
		got, err := series(fmt.Sprintf("netpulse_via=%q", control.viaLabel))
		require.NoError(t, err)
		require.Empty(t, got, "a stock Prometheus refuses every series of a request with a native histogram")
	})
}
