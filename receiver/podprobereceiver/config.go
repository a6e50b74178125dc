// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podprobereceiver

import (
	"errors"
	"fmt"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/checks"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/internal/shard"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/metadata"
)

// Config of the pod_probe receiver. Every field is validated, at `otelcol-netpulse validate`
// time, by the Validate methods of Config and of its parts, with errors that name the field
// and its allowed range.
type Config struct {
	// Kubernetes API access for peer and selector discovery.
	kubeclient.Config `mapstructure:",squash"`

	// Interval is the base probe round; the planner stretches it so the whole cluster stays
	// within ProbeBudget.
	Interval time.Duration `mapstructure:"interval"`
	// Timeout bounds one probe (one ICMP round of Count echoes, one connect, one GET, one lookup).
	Timeout time.Duration `mapstructure:"timeout"`
	// K is how many rotating peers each agent probes per round; every peer is probed by at
	// least K+StablePeers agents each round.
	K int `mapstructure:"k"`
	// StablePeers is how many peers (its ring successors) each agent probes every round
	// besides the K rotating ones: those pairs carry netpulse.pair.stable and get
	// PodNetworkHealth objects and per-pair series at the gateway.
	StablePeers int `mapstructure:"stable_peers"`
	// ProbeBudget bounds cluster-wide peer probes per second (0 = unbounded).
	ProbeBudget float64 `mapstructure:"probe_budget"`
	// Shards is how many gateway shards judge this agent's targets (1: one gateway). Above
	// 1, every target's points carry netpulse.shard (its node's shard, internal/shard), which
	// a filter per shard routes on, and each round emits netpulse.probe.rounds, which every
	// shard receives (docs/sharding.md).
	Shards int `mapstructure:"shards"`
	// AddressFamilies to probe when a target has both: ipv4, ipv6.
	AddressFamilies []string `mapstructure:"address_families"`
	// MaxConcurrency bounds probes in flight at once.
	MaxConcurrency int `mapstructure:"max_concurrency"`

	ICMP ICMPConfig `mapstructure:"icmp"`
	// Peers are the other pods of the collector's own DaemonSet.
	Peers PeersConfig `mapstructure:"peers"`
	// Selectors are pods chosen by namespace + label selector, probed on a named or numbered port.
	Selectors []SelectorConfig `mapstructure:"selectors"`
	// Static targets: an address, host:port or URL each.
	Static []StaticConfig `mapstructure:"static"`
	// DNS probes, run by every agent every round.
	DNS []DNSConfig `mapstructure:"dns"`

	// AllowLoopback and AllowLinkLocal lift the refusal of loopback and link-local
	// (cloud metadata) addresses.
	AllowLoopback  bool `mapstructure:"allow_loopback"`
	AllowLinkLocal bool `mapstructure:"allow_link_local"`

	// Spans: off (default), all, or failures (only failed probes emit spans).
	Spans string `mapstructure:"spans"`

	// Source is the probing pod's identity, normally from downward-API environment variables.
	Source SourceConfig `mapstructure:"source"`

	// Checks runs the declared checks (NetworkCheck, and optionally OpenShift's
	// PodNetworkConnectivityCheck) that the gateway placed on this collector, and emits one
	// log record per run to the logs pipeline (docs/checks.md).
	Checks ChecksConfig `mapstructure:"checks"`

	metadata.MetricsBuilderConfig `mapstructure:",squash"`
}

// ICMPConfig configures ICMP echo probes.
type ICMPConfig struct {
	// Mode: auto (unprivileged datagram socket, else raw), unprivileged, privileged.
	Mode string `mapstructure:"mode"`
	// Count echoes per target per round (loss ratio and jitter come from these).
	Count int `mapstructure:"count"`
	// EchoInterval between the echoes of one round.
	EchoInterval time.Duration `mapstructure:"echo_interval"`
	// ReceiveBuffer is the socket receive buffer in bytes (bursts of replies).
	ReceiveBuffer int `mapstructure:"receive_buffer"`
	// PathMTU probes each stable peer with full-size don't-fragment echoes (off by default).
	PathMTU PathMTUConfig `mapstructure:"path_mtu"`
}

// HTTPProbeConfig configures HTTP(S) GET probes.
type HTTPProbeConfig struct {
	Scheme string `mapstructure:"scheme"`
	Path   string `mapstructure:"path"`
	// Host overrides the Host header.
	Host string `mapstructure:"host"`
	// ExpectedStatus codes; empty means 200-399.
	ExpectedStatus []int `mapstructure:"expected_status"`
	// InsecureSkipVerify: pod IPs rarely appear in serving certificates.
	InsecureSkipVerify bool  `mapstructure:"insecure_skip_verify"`
	MaxRedirects       int   `mapstructure:"max_redirects"`
	MaxBodyBytes       int64 `mapstructure:"max_body_bytes"`
}

// PeersConfig selects the agent's peers: the pods of its own DaemonSet.
type PeersConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// Namespace of the DaemonSet (default: the source pod's namespace).
	Namespace string `mapstructure:"namespace"`
	// LabelSelector matching the DaemonSet's pods.
	LabelSelector string `mapstructure:"label_selector"`
	// ReadyGracePeriod: a newly Ready pod becomes a target only after this long.
	ReadyGracePeriod time.Duration `mapstructure:"ready_grace_period"`
	// NodeIPs also probes each peer's node addresses (the host-network path).
	NodeIPs bool `mapstructure:"node_ips"`
	// ZoneFromNodes reads node labels (topology.kubernetes.io/zone) through a metadata-only
	// node watch, so the planner can cross zones.
	ZoneFromNodes bool `mapstructure:"zone_from_nodes"`
	// Probes run against each planned peer: icmp, tcp, http.
	Probes []string `mapstructure:"probes"`
	// Port for tcp and http probes of peers.
	Port int             `mapstructure:"port"`
	HTTP HTTPProbeConfig `mapstructure:"http"`
}

// SelectorConfig chooses pods by namespace and label selector.
type SelectorConfig struct {
	Namespace     string `mapstructure:"namespace"`
	LabelSelector string `mapstructure:"label_selector"`
	// Port is a number or the name of a container port.
	Port string `mapstructure:"port"`
	// Probes: icmp, tcp, http.
	Probes []string        `mapstructure:"probes"`
	HTTP   HTTPProbeConfig `mapstructure:"http"`
	// Observers is how many agents probe each selected pod per round (default: k).
	Observers int `mapstructure:"observers"`
}

// Unmarshal accepts port as a number (port: 8080) or a name (port: http): YAML gives the
// first as an int, which the string field would refuse.
func (s *SelectorConfig) Unmarshal(conf *confmap.Conf) error {
	m := conf.ToStringMap()
	switch v := m["port"].(type) {
	case int:
		m["port"] = strconv.Itoa(v)
	case int64:
		m["port"] = strconv.FormatInt(v, 10)
	case uint64:
		m["port"] = strconv.FormatUint(v, 10)
	case float64:
		if v != float64(int64(v)) {
			return fmt.Errorf("port: %v is not a whole number", v)
		}
		m["port"] = strconv.FormatInt(int64(v), 10)
	}
	type plain SelectorConfig // without this method: no recursion
	return confmap.NewFromStringMap(m).Unmarshal((*plain)(s))
}

// StaticConfig is one fixed target.
type StaticConfig struct {
	// Target is an IP address (icmp), host:port (tcp) or an http(s) URL (http).
	Target string `mapstructure:"target"`
	// Probes overrides the probe inferred from Target's form.
	Probes []string        `mapstructure:"probes"`
	HTTP   HTTPProbeConfig `mapstructure:"http"`
}

// DNSConfig is one DNS lookup probe.
type DNSConfig struct {
	// Server host:port; empty means the first nameserver of ResolvConf (the cluster DNS).
	Server     string `mapstructure:"server"`
	ResolvConf string `mapstructure:"resolv_conf"`
	Name       string `mapstructure:"name"`
	QueryType  string `mapstructure:"query_type"`
	Protocol   string `mapstructure:"protocol"`
	// AcceptNXDOMAIN counts an authoritative "no such name" as success.
	AcceptNXDOMAIN bool `mapstructure:"accept_nxdomain"`
}

// SourceConfig is the probing pod's identity (downward API).
type SourceConfig struct {
	PodName   string `mapstructure:"pod_name"`
	PodUID    string `mapstructure:"pod_uid"`
	Namespace string `mapstructure:"namespace"`
	NodeName  string `mapstructure:"node_name"`
	// PodIPs, comma-separated (status.podIPs); the first is k8s.pod.ip.
	PodIPs string `mapstructure:"pod_ips"`
}

// Spans modes.
const (
	SpansOff      = "off"
	SpansAll      = "all"
	SpansFailures = "failures"
)

// ICMP modes.
const (
	ICMPAuto         = "auto"
	ICMPUnprivileged = "unprivileged"
	ICMPPrivileged   = "privileged"
)

// Validation. The collector's configuration walk (confmap.Validate) calls Validate on
// Config and on each struct in it (icmp, peers, every selectors, static and dns entry,
// source) and puts the struct's path in front of what it returns: each Validate names its
// own fields, relative to itself ("count", "probes::1"), and checks that need another
// part of the configuration stay on Config. Every error names the field and the allowed
// values.

// allProbes are the probe types of peers, selectors and static targets.
var allProbes = contract.AddressProbeTypes[:]

// Validate checks the top-level fields and what spans several parts: timeout against
// interval, the ICMP echoes against the timeout, static targets against the address
// policy, the source's UID against peers.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	errs = append(errs, c.Config.Check())
	if c.Interval < 100*time.Millisecond || c.Interval > time.Hour {
		add("interval: %v out of range [100ms, 1h]", c.Interval)
	}
	if c.Timeout <= 0 || c.Timeout > c.Interval {
		add("timeout: %v out of range (0, interval=%v]", c.Timeout, c.Interval)
	}
	if c.K < 1 || c.K > 64 {
		add("k: %d out of range [1, 64]", c.K)
	}
	if c.StablePeers < 0 || c.StablePeers > 16 {
		add("stable_peers: %d out of range [0, 16]", c.StablePeers)
	}
	if c.ProbeBudget < 0 || c.ProbeBudget > 1e6 {
		add("probe_budget: %v out of range [0, 1000000] probes/s (0 = unbounded)", c.ProbeBudget)
	}
	if c.Shards < 1 || c.Shards > shard.MaxCount {
		add("shards: %d out of range [1, %d] gateway shards", c.Shards, shard.MaxCount)
	}
	if len(c.AddressFamilies) == 0 {
		add("address_families: empty; want one or both of %s", strings.Join(contract.NetworkTypes[:], ", "))
	}
	for i, f := range c.AddressFamilies {
		if !slices.Contains(contract.NetworkTypes[:], f) {
			add("address_families::%d: %q; want %s", i, f, strings.Join(contract.NetworkTypes[:], " or "))
		}
	}
	if c.MaxConcurrency < 1 || c.MaxConcurrency > 4096 {
		add("max_concurrency: %d out of range [1, 4096]", c.MaxConcurrency)
	}
	// ICMPConfig.Validate reports an echo_interval out of range.
	if c.ICMP.echoIntervalInRange() && c.ICMP.Count > 1 && time.Duration(c.ICMP.Count-1)*c.ICMP.EchoInterval >= c.Timeout {
		add("icmp: count=%d echoes %v apart do not fit in timeout=%v", c.ICMP.Count, c.ICMP.EchoInterval, c.Timeout)
	}
	c.ICMP.PathMTU.validate(add)
	if p := c.ICMP.PathMTU; p.Enabled && c.ICMP.echoIntervalInRange() && p.Count > 1 && time.Duration(p.Count-1)*c.ICMP.EchoInterval >= c.Timeout {
		add("icmp::path_mtu: count=%d echoes %v apart do not fit in timeout=%v", p.Count, c.ICMP.EchoInterval, c.Timeout)
	}
	// StaticConfig.Validate reports a target that does not parse; the address policy
	// (allow_loopback, allow_link_local) is Config's.
	policy := c.policy()
	for i, s := range c.Static {
		if st, err := parseStatic(s); err == nil && st.addr.IsValid() {
			if err := policy.Check(st.addr); err != nil {
				add("static::%d::target: %v", i, err)
			}
		}
	}
	if !c.Peers.Enabled && len(c.Selectors) == 0 && len(c.Static) == 0 && len(c.DNS) == 0 && !c.Checks.Enabled {
		add("no targets: enable peers or checks, or configure selectors, static or dns")
	}
	if c.Checks.Enabled {
		switch c.Checks.Vantage {
		case checks.VantageAgent:
			if c.Source.NodeName == "" {
				add("checks: vantage agent needs source::node_name (NODE_NAME from the downward API: fieldRef spec.nodeName)")
			}
		case checks.VantageSidecar:
			if c.Source.PodName == "" || c.Source.Namespace == "" {
				add("checks: vantage sidecar needs source::pod_name and source::namespace (POD_NAME, POD_NAMESPACE from the downward API)")
			}
		default:
			add("checks::vantage: %q; want agent or sidecar", c.Checks.Vantage)
		}
		if c.Checks.MaxChecks < 1 || c.Checks.MaxChecks > 10000 {
			add("checks::max_checks: %d out of range [1, 10000]", c.Checks.MaxChecks)
		}
	}
	switch c.Spans {
	case SpansOff, SpansAll, SpansFailures:
	default:
		add("spans: %q; want off, all or failures", c.Spans)
	}
	if c.Peers.Enabled && c.Source.PodUID == "" {
		add("source::pod_uid: required with peers (set POD_UID from the downward API: fieldRef metadata.uid)")
	}
	return kubeclient.JoinErrors(errs...)
}

// Validate checks the ICMP settings; Config checks that the echoes fit in its timeout.
func (c ICMPConfig) Validate() error {
	var errs []error
	switch c.Mode {
	case ICMPAuto, ICMPUnprivileged, ICMPPrivileged:
	default:
		errs = append(errs, fmt.Errorf("mode: %q; want auto, unprivileged or privileged", c.Mode))
	}
	if c.Count < 1 || c.Count > 100 {
		errs = append(errs, fmt.Errorf("count: %d out of range [1, 100]", c.Count))
	}
	if !c.echoIntervalInRange() {
		errs = append(errs, fmt.Errorf("echo_interval: %v out of range [1ms, 10s]", c.EchoInterval))
	}
	if c.ReceiveBuffer < 0 || c.ReceiveBuffer > 64<<20 {
		errs = append(errs, fmt.Errorf("receive_buffer: %d out of range [0, 64MiB]", c.ReceiveBuffer))
	}
	return kubeclient.JoinErrors(errs...)
}

func (c ICMPConfig) echoIntervalInRange() bool {
	return c.EchoInterval >= time.Millisecond && c.EchoInterval <= 10*time.Second
}

// Validate checks the peers when they are enabled (nothing otherwise, their http block
// included, which is why HTTPProbeConfig has no Validate of its own); Config checks that
// the source has a pod UID.
func (p PeersConfig) Validate() error {
	if !p.Enabled {
		return nil
	}
	var errs []error
	if p.LabelSelector == "" {
		errs = append(errs, errors.New("label_selector: required when enabled (the DaemonSet's pod labels)"))
	} else if _, err := labels.Parse(p.LabelSelector); err != nil {
		errs = append(errs, fmt.Errorf("label_selector: %w", err))
	}
	if p.Namespace != "" {
		if msgs := validation.IsDNS1123Label(p.Namespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("namespace: %q: %s", p.Namespace, strings.Join(msgs, "; ")))
		}
	}
	if p.ReadyGracePeriod < 0 || p.ReadyGracePeriod > time.Hour {
		errs = append(errs, fmt.Errorf("ready_grace_period: %v out of range [0, 1h]", p.ReadyGracePeriod))
	}
	errs = append(errs, validateProbeList("probes", p.Probes, allProbes)...)
	if needsPort(p.Probes) && (p.Port < 1 || p.Port > 65535) {
		errs = append(errs, fmt.Errorf("port: %d out of range [1, 65535] (required by tcp/http peer probes)", p.Port))
	}
	errs = append(errs, p.HTTP.validate()...)
	return kubeclient.JoinErrors(errs...)
}

// Validate checks one selector.
func (s SelectorConfig) Validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Label(s.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("namespace: %q: %s", s.Namespace, strings.Join(msgs, "; ")))
	}
	if s.LabelSelector == "" {
		errs = append(errs, errors.New("label_selector: required"))
	} else if sel, err := labels.Parse(s.LabelSelector); err != nil {
		errs = append(errs, fmt.Errorf("label_selector: %w", err))
	} else if sel.Empty() {
		errs = append(errs, fmt.Errorf("label_selector: %q selects every pod; name the pods to probe", s.LabelSelector))
	}
	errs = append(errs, validateProbeList("probes", s.Probes, allProbes)...)
	if needsPort(s.Probes) {
		if s.Port == "" {
			errs = append(errs, errors.New("port: required by tcp/http probes (a number or a container port name)"))
		} else if n, err := strconv.Atoi(s.Port); err == nil {
			if n < 1 || n > 65535 {
				errs = append(errs, fmt.Errorf("port: %d out of range [1, 65535]", n))
			}
		} else if msgs := validation.IsValidPortName(s.Port); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("port: %q is neither a number nor a valid port name: %s", s.Port, strings.Join(msgs, "; ")))
		}
	}
	if s.Observers < 0 || s.Observers > 64 {
		errs = append(errs, fmt.Errorf("observers: %d out of range [0, 64] (0 = k)", s.Observers))
	}
	errs = append(errs, s.HTTP.validate()...)
	return kubeclient.JoinErrors(errs...)
}

// Validate checks that the target parses, then its probes and http block; Config checks
// its address against allow_loopback and allow_link_local.
func (s StaticConfig) Validate() error {
	st, err := parseStatic(s)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	errs := validateProbeList("probes", st.probes, allProbes)
	errs = append(errs, s.HTTP.validate()...)
	return kubeclient.JoinErrors(errs...)
}

// Validate checks one DNS probe.
func (d DNSConfig) Validate() error {
	var errs []error
	if d.Name == "" {
		errs = append(errs, errors.New("name: required (the name to look up)"))
	}
	if d.Server != "" {
		if _, _, err := net.SplitHostPort(d.Server); err != nil {
			errs = append(errs, fmt.Errorf("server: %q is not host:port", d.Server))
		}
	}
	switch d.Protocol {
	case "", "udp", "tcp":
	default:
		errs = append(errs, fmt.Errorf("protocol: %q; want udp or tcp", d.Protocol))
	}
	switch strings.ToUpper(d.QueryType) {
	case "", "A", "AAAA", "SRV", "CNAME", "TXT", "NS", "PTR", "MX", "SOA":
	default:
		errs = append(errs, fmt.Errorf("query_type: %q; want A, AAAA, SRV, CNAME, TXT, NS, PTR, MX or SOA", d.QueryType))
	}
	return kubeclient.JoinErrors(errs...)
}

// Validate checks the source's addresses; Config checks that it has a pod UID with peers.
func (s SourceConfig) Validate() error {
	var errs []error
	for _, ip := range splitIPs(s.PodIPs) {
		if _, err := netip.ParseAddr(ip); err != nil {
			errs = append(errs, fmt.Errorf("pod_ips: %q is not an IP address", ip))
		}
	}
	return kubeclient.JoinErrors(errs...)
}

// validate is called by the owner of the http block (peers only when enabled), so its
// errors name the field from there: "http::scheme".
func (h HTTPProbeConfig) validate() []error {
	var errs []error
	switch h.Scheme {
	case "", "http", "https":
	default:
		errs = append(errs, fmt.Errorf("http::scheme: %q; want http or https", h.Scheme))
	}
	if h.Path != "" && !strings.HasPrefix(h.Path, "/") {
		errs = append(errs, fmt.Errorf("http::path: %q must start with /", h.Path))
	}
	for i, s := range h.ExpectedStatus {
		if s < 100 || s > 599 {
			errs = append(errs, fmt.Errorf("http::expected_status::%d: %d out of range [100, 599]", i, s))
		}
	}
	if h.MaxRedirects < 0 || h.MaxRedirects > 10 {
		errs = append(errs, fmt.Errorf("http::max_redirects: %d out of range [0, 10]", h.MaxRedirects))
	}
	if h.MaxBodyBytes < 0 || h.MaxBodyBytes > 16<<20 {
		errs = append(errs, fmt.Errorf("http::max_body_bytes: %d out of range [0, 16MiB]", h.MaxBodyBytes))
	}
	return errs
}

func validateProbeList(field string, probes, allowed []string) []error {
	var errs []error
	if len(probes) == 0 {
		errs = append(errs, fmt.Errorf("%s: empty; want one or more of %s", field, strings.Join(allowed, ", ")))
	}
	seen := map[string]bool{}
	for i, p := range probes {
		ok := false
		for _, a := range allowed {
			ok = ok || p == a
		}
		if !ok {
			errs = append(errs, fmt.Errorf("%s::%d: %q; want one of %s", field, i, p, strings.Join(allowed, ", ")))
		}
		if seen[p] {
			errs = append(errs, fmt.Errorf("%s::%d: %q listed twice", field, i, p))
		}
		seen[p] = true
	}
	return errs
}

func needsPort(probes []string) bool {
	for _, p := range probes {
		if p == contract.ProbeTypeTCP || p == contract.ProbeTypeHTTP {
			return true
		}
	}
	return false
}

func splitIPs(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
}

// staticTarget is a parsed StaticConfig.
type staticTarget struct {
	addr   netip.Addr // set when the target is an IP literal
	host   string     // host name or IP text
	port   uint16
	url    string
	probes []string
}

// parseStatic infers the probe from the target's form: IP -> icmp, host:port -> tcp,
// URL -> http. Probes may override it.
func parseStatic(s StaticConfig) (staticTarget, error) {
	var st staticTarget
	t := strings.TrimSpace(s.Target)
	switch {
	case t == "":
		return st, errors.New("empty; want an IP address, host:port or an http(s) URL")
	case strings.Contains(t, "://"):
		u, err := url.Parse(t)
		if err != nil {
			return st, fmt.Errorf("%q: %v", t, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return st, fmt.Errorf("%q: scheme %q; want http or https", t, u.Scheme)
		}
		if u.User != nil {
			return st, fmt.Errorf("%q: URLs with credentials are refused (probes never send credentials)", u.Redacted())
		}
		if u.Hostname() == "" {
			return st, fmt.Errorf("%q: no host", t)
		}
		st.url, st.host, st.probes = t, u.Hostname(), []string{contract.ProbeTypeHTTP}
		if p := u.Port(); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 {
				return st, fmt.Errorf("%q: port %q out of range [1, 65535]", t, p)
			}
			st.port = uint16(n)
		}
		// An IP literal host is an address like any other target's: the same policy
		// (loopback, link-local, the metadata address) applies to it.
		if a, err := netip.ParseAddr(st.host); err == nil {
			st.addr = a
		}
	default:
		if a, err := netip.ParseAddr(t); err == nil {
			st.addr, st.host, st.probes = a, a.String(), []string{contract.ProbeTypeICMP}
			break
		}
		host, portStr, err := net.SplitHostPort(t)
		if err != nil {
			return st, fmt.Errorf("%q is not an IP address, host:port or URL", t)
		}
		n, err := strconv.Atoi(portStr)
		if err != nil || n < 1 || n > 65535 {
			return st, fmt.Errorf("%q: port %q out of range [1, 65535]", t, portStr)
		}
		if msgs := validation.IsDNS1123Subdomain(strings.ToLower(host)); len(msgs) > 0 {
			if _, err := netip.ParseAddr(host); err != nil {
				return st, fmt.Errorf("%q: host %q is neither an IP address nor a DNS name", t, host)
			}
		}
		st.host, st.port, st.probes = host, uint16(n), []string{contract.ProbeTypeTCP}
		if a, err := netip.ParseAddr(host); err == nil {
			st.addr = a
		}
	}
	if len(s.Probes) > 0 {
		st.probes = s.Probes
	}
	if st.addr.IsValid() {
		st.addr = st.addr.Unmap()
	}
	return st, nil
}

// ChecksConfig: declared checks run from this collector.
type ChecksConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// Vantage is "agent" (the DaemonSet: checks whose source pod is on this node and has no
	// sidecar) or "sidecar" (a collector inside a workload pod: checks whose source is this
	// pod).
	Vantage string `mapstructure:"vantage"`
	// OpenShift also runs PodNetworkConnectivityChecks (needs their CRD and
	// deploy/rbac/openshift-checks.yaml).
	OpenShift bool `mapstructure:"openshift"`
	// MaxChecks bounds the checks run at once from this collector.
	MaxChecks int `mapstructure:"max_checks"`
}
