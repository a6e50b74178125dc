// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podprobereceiver

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/metadata"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg
}

func TestDefaultConfigIsValidInsideAPod(t *testing.T) {
	t.Setenv(EnvPodUID, "uid-1")
	t.Setenv(EnvNamespace, "netpulse")
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	require.NoError(t, confmap.Validate(cfg))
	require.Equal(t, "uid-1", cfg.Source.PodUID)
	require.True(t, cfg.Peers.Enabled)
	require.Equal(t, 3, cfg.K)
	require.Equal(t, 1, cfg.StablePeers)
}

func TestFullConfig(t *testing.T) {
	cfg := loadConfig(t, "full")
	require.NoError(t, confmap.Validate(cfg))
	require.Equal(t, kubeclient.AuthKubeConfig, cfg.AuthType)
	require.Equal(t, 30*time.Second, cfg.Interval)
	require.Equal(t, 4, cfg.K)
	require.Equal(t, 2, cfg.StablePeers)
	require.Equal(t, 4, cfg.Shards)
	require.Equal(t, []string{"ipv6"}, cfg.AddressFamilies)
	require.Equal(t, 5, cfg.ICMP.Count)
	require.Equal(t, []string{"icmp", "tcp", "http"}, cfg.Peers.Probes)
	require.Equal(t, "http", cfg.Selectors[0].Port)
	require.Equal(t, "8080", cfg.Selectors[1].Port, "a number works unquoted, as documented")
	require.Equal(t, []string{"tcp"}, cfg.Selectors[1].Probes)
	require.True(t, cfg.Selectors[0].HTTP.InsecureSkipVerify)
	require.Len(t, cfg.Static, 3)
	require.Equal(t, "AAAA", cfg.DNS[1].QueryType)
	require.Equal(t, SpansFailures, cfg.Spans)
	require.Equal(t, "10.244.1.7,fd00:10:244:1::7", cfg.Source.PodIPs)
}

// requireProblems asserts that each want begins one of the problems err reports, read with
// its whole path (a struct's path from the validation walk, then the field), and that no
// problem is reported twice.
func requireProblems(t *testing.T, err error, wants ...string) {
	t.Helper()
	require.NoError(t, kubeclient.MatchProblems(err, wants...))
}

func TestInvalidConfigsNameTheField(t *testing.T) {
	requireProblems(t, confmap.Validate(loadConfig(t, "invalid_ranges")),
		"interval: 10ms out of range [100ms, 1h]",
		"timeout: 0s out of range",
		"k: 0 out of range [1, 64]",
		"stable_peers: 17 out of range [0, 16]",
		"probe_budget: -1 out of range",
		"shards: 65 out of range [1, 64] gateway shards",
		`address_families::0: "ipv5"; want ipv4 or ipv6`,
		"max_concurrency: 0 out of range [1, 4096]",
		`icmp: mode: "raw"; want auto, unprivileged or privileged`,
		"icmp: count: 0 out of range [1, 100]",
		"icmp: echo_interval: 0s out of range [1ms, 10s]",
		`spans: "sometimes"; want off, all or failures`,
	)

	err := confmap.Validate(loadConfig(t, "invalid_targets"))
	requireProblems(t, err,
		"peers: label_selector:",
		`peers: probes::1: "udp"; want one of icmp, tcp, http`,
		"peers: port: 0 out of range [1, 65535]",
		`selectors::0: namespace: "Not_A_Namespace"`,
		"selectors::0: label_selector: required",
		"selectors::0: port: required by tcp/http probes",
		"static::0::target: link-local address 169.254.169.254 refused",
		`static::1: target: "http://user:xxxxx@example.com/": URLs with credentials are refused`,
		"static::2::target: loopback address ::1 refused",
		`static::3: target: "not a target" is not an IP address, host:port or URL`,
		"static::4::target: loopback address 127.0.0.1 refused",
		"static::5::target: link-local address 169.254.169.254 refused",
		"static::6::target: link-local address fe80::1 refused",
		`static::7: target: "http://192.0.2.10:70000/": port "70000" out of range [1, 65535]`,
		"dns::0: name: required",
		`dns::0: server: "nameserver-without-port" is not host:port`,
	)
	require.NotContains(t, err.Error(), "pass", "credentials must not be echoed")

	requireProblems(t, confmap.Validate(loadConfig(t, "no_targets")), "no targets")
}

// The parts that have no case in testdata: each is reported under its own path.
func TestInvalidPartsNameTheirPath(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Source.PodUID = "uid-1"
	cfg.Timeout = 150 * time.Millisecond
	cfg.ICMP.ReceiveBuffer = -1
	cfg.Peers.Namespace = "Bad_NS"
	cfg.Peers.ReadyGracePeriod = 2 * time.Hour
	cfg.Peers.Probes = []string{"icmp", "icmp"}
	cfg.Peers.HTTP = HTTPProbeConfig{Scheme: "ftp", Path: "health", ExpectedStatus: []int{200, 700}, MaxRedirects: 11, MaxBodyBytes: -1}
	cfg.Selectors = []SelectorConfig{
		{Namespace: "shop", LabelSelector: "app=a", Port: "8080", Probes: []string{"tcp"}},
		{Namespace: "shop", LabelSelector: "app=b", Port: "70000", Probes: []string{"tcp"}, Observers: 65},
		{Namespace: "shop", LabelSelector: "app in (a", Port: "not_a_name!", Probes: []string{"http"}, HTTP: HTTPProbeConfig{Scheme: "gopher"}},
		{Namespace: "shop", LabelSelector: " ", Probes: []string{}},
	}
	cfg.Static = []StaticConfig{{Target: "192.0.2.1", Probes: []string{"dns"}, HTTP: HTTPProbeConfig{MaxRedirects: -1}}}
	cfg.DNS = []DNSConfig{{Name: "example.com", Protocol: "quic", QueryType: "ANY"}}
	cfg.Source.PodIPs = "10.0.0.1,not-an-ip"
	requireProblems(t, confmap.Validate(cfg),
		"icmp: count=3 echoes 100ms apart do not fit in timeout=150ms",
		"icmp: receive_buffer: -1 out of range [0, 64MiB]",
		`peers: namespace: "Bad_NS": `,
		"peers: ready_grace_period: 2h0m0s out of range [0, 1h]",
		`peers: probes::1: "icmp" listed twice`,
		`peers: http::scheme: "ftp"; want http or https`,
		`peers: http::path: "health" must start with /`,
		"peers: http::expected_status::1: 700 out of range [100, 599]",
		"peers: http::max_redirects: 11 out of range [0, 10]",
		"peers: http::max_body_bytes: -1 out of range [0, 16MiB]",
		"selectors::1: port: 70000 out of range [1, 65535]",
		"selectors::1: observers: 65 out of range [0, 64] (0 = k)",
		"selectors::2: label_selector: ",
		`selectors::2: port: "not_a_name!" is neither a number nor a valid port name`,
		`selectors::2: http::scheme: "gopher"; want http or https`,
		`selectors::3: label_selector: " " selects every pod; name the pods to probe`,
		"selectors::3: probes: empty; want one or more of icmp, tcp, http",
		`static::0: probes::0: "dns"; want one of icmp, tcp, http`,
		"static::0: http::max_redirects: -1 out of range [0, 10]",
		`dns::0: protocol: "quic"; want udp or tcp`,
		`dns::0: query_type: "ANY"; want A, AAAA, SRV, CNAME, TXT, NS, PTR, MX or SOA`,
		`source: pod_ips: "not-an-ip" is not an IP address`,
	)

	// Peers that are disabled are not checked, their http block included; the source
	// needs its pod UID only with peers.
	cfg = createDefaultConfig().(*Config)
	cfg.Peers = PeersConfig{Enabled: false, LabelSelector: "", HTTP: HTTPProbeConfig{Scheme: "ftp"}}
	cfg.DNS = []DNSConfig{{Name: "example.com"}}
	require.NoError(t, confmap.Validate(cfg))
	cfg.Peers.Enabled = true
	requireProblems(t, confmap.Validate(cfg),
		"peers: label_selector: required when enabled (the DaemonSet's pod labels)",
		`peers: http::scheme: "ftp"; want http or https`,
		"source::pod_uid: required with peers",
	)
}

func TestParseStaticInfersProbe(t *testing.T) {
	for _, tc := range []struct {
		in    string
		probe string
		host  string
		port  uint16
	}{
		{"192.0.2.1", "icmp", "192.0.2.1", 0},
		{"2001:db8::1", "icmp", "2001:db8::1", 0},
		{"192.0.2.1:443", "tcp", "192.0.2.1", 443},
		{"[2001:db8::1]:53", "tcp", "2001:db8::1", 53},
		{"db.example.com:5432", "tcp", "db.example.com", 5432},
		{"https://example.com:8443/x", "http", "example.com", 8443},
	} {
		st, err := parseStatic(StaticConfig{Target: tc.in})
		require.NoError(t, err, tc.in)
		require.Equal(t, []string{tc.probe}, st.probes, tc.in)
		require.Equal(t, tc.host, st.host, tc.in)
		require.Equal(t, tc.port, st.port, tc.in)
	}
	_, err := parseStatic(StaticConfig{Target: "ftp://x/"})
	require.ErrorContains(t, err, "want http or https")
	_, err = parseStatic(StaticConfig{Target: "host:99999"})
	require.ErrorContains(t, err, "out of range")
}
