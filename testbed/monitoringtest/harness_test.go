// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package monitoringtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/netpulse/netpulse/testbed/kubetest"
)

// need returns the path of a binary the tests cannot do without, failing with what to
// install when it is missing (never a skip: `make test` installs it via hack/deps.sh).
func need(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found on PATH: install Debian's prometheus package (it brings prometheus and promtool; `make deps` as root does)", name)
	}
	return p
}

func repoPath(t testing.TB, elem ...string) string {
	t.Helper()
	root, err := kubetest.RepoRoot()
	require.NoError(t, err)
	return filepath.Join(append([]string{root}, elem...)...)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// process is a child process whose output is kept in a file, killed with the test.
type process struct {
	cmd *exec.Cmd
	log string
}

func start(t testing.TB, name string, env []string, args ...string) *process {
	t.Helper()
	log := filepath.Join(t.TempDir(), filepath.Base(name)+".log")
	f, err := os.Create(log)
	require.NoError(t, err)
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	p := &process{cmd: cmd, log: log}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		f.Close()
		if t.Failed() {
			out, _ := os.ReadFile(log)
			if len(out) > 8000 {
				out = out[len(out)-8000:]
			}
			t.Logf("%s output (tail):\n%s", filepath.Base(name), out)
		}
	})
	return p
}

// waitHTTP waits until url answers 200 (the process may take a moment to listen).
func waitHTTP(t testing.TB, p *process, u string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if p.cmd.ProcessState != nil {
			t.Fatalf("%s exited", p.cmd.Path)
		}
		resp, err := http.Get(u)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(p.log)
			t.Fatalf("%s did not answer 200: %v\n%s", u, err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sample is one series of a Prometheus text exposition.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads a Prometheus text endpoint.
func scrape(u string) ([]sample, error) {
	resp, err := http.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", u, resp.Status)
	}
	var out []sample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", u, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseSample(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	rest := line
	if i := strings.IndexAny(line, "{ "); i >= 0 && line[i] == '{' {
		s.name = line[:i]
		rest = line[i+1:]
		for !strings.HasPrefix(rest, "}") {
			eq := strings.Index(rest, "=\"")
			if eq < 0 {
				return s, fmt.Errorf("bad labels in %q", line)
			}
			key := rest[:eq]
			rest = rest[eq+2:]
			var val strings.Builder
			for {
				if rest == "" {
					return s, fmt.Errorf("unterminated label in %q", line)
				}
				c := rest[0]
				rest = rest[1:]
				if c == '\\' && rest != "" {
					switch rest[0] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[0])
					}
					rest = rest[1:]
					continue
				}
				if c == '"' {
					break
				}
				val.WriteByte(c)
			}
			s.labels[key] = val.String()
			rest = strings.TrimPrefix(rest, ",")
		}
		rest = strings.TrimSpace(rest[1:])
	} else {
		f := strings.Fields(line)
		if len(f) < 2 {
			return s, fmt.Errorf("bad sample %q", line)
		}
		s.name, rest = f[0], f[1]
	}
	v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
	if err != nil {
		return s, fmt.Errorf("bad value in %q: %w", line, err)
	}
	s.value = v
	return s, nil
}

// promResult is one element of an instant query's vector.
type promResult struct {
	Metric map[string]string
	Value  float64
}

// query runs an instant query against a Prometheus server.
func query(ctx context.Context, base, expr string) ([]promResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query?query="+url.QueryEscape(expr), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("query %q: %w: %s", expr, err, body)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", expr, r.Error)
	}
	var out []promResult
	for _, e := range r.Data.Result {
		s, _ := e.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %q: value %v", expr, e.Value[1])
		}
		out = append(out, promResult{Metric: e.Metric, Value: v})
	}
	return out, nil
}

// eventually polls cond until it returns true or the deadline passes; the deadline bounds
// the wait, it is not what the test asserts.
func eventually(t testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	last := ""
	for {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last: %s", what, within, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// gatewayExport returns the shipped gateway's processor configurations by name and the
// processors of its metrics/export pipeline.
func gatewayExport(t testing.TB) (map[string]any, []string) {
	t.Helper()
	raw, err := os.ReadFile(repoPath(t, "deploy", "agent-gateway", "config", "gateway.yaml"))
	require.NoError(t, err)
	var doc struct {
		Processors map[string]any `yaml:"processors"`
		Service    struct {
			Pipelines map[string]struct {
				Processors []string `yaml:"processors"`
				Exporters  []string `yaml:"exporters"`
			} `yaml:"pipelines"`
		} `yaml:"service"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	p, ok := doc.Service.Pipelines["metrics/export"]
	require.True(t, ok, "gateway.yaml has no metrics/export pipeline")
	return doc.Processors, p.Processors
}
