// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package simcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The address plan. Everything the harness sends goes to loopback, to the host side of its
// own bridge, or to the addresses of its own network namespaces: 198.18.0.0/24 (RFC 2544
// benchmarking space) and fd00:6e70::/64 (ULA; 6e70 is "np").
var (
	// HostIPv4 and HostIPv6 are the host side of the bridge: the API server, the gateway
	// slot and test sinks listen here.
	HostIPv4 = GatewayIPv4(0)
	HostIPv6 = netip.MustParseAddr("fd00:6e70::1")
	// Prefix4 and Prefix6 are the simulated network.
	Prefix4 = netip.MustParsePrefix("198.18.0.0/24")
	Prefix6 = netip.MustParsePrefix("fd00:6e70::/64")
	// ServiceCIDR is kube-apiserver's --service-cluster-ip-range (testbed/kubetest): the
	// ClusterIPs of Services. Every pod namespace routes it to eth0, and the harness plays
	// kube-proxy with DNAT rules inside the namespaces (services.go).
	ServiceCIDR = netip.MustParsePrefix("10.0.0.0/24")
)

// GatewaySlots is how many gateway shards can run at once: slot i listens on
// GatewayIPv4(i), so their fixed ports (gateway.yaml's) do not collide.
const GatewaySlots = 4

// GatewayIPv4 is the host address of gateway slot i: 198.18.0.(1+i); slot 0 is HostIPv4.
func GatewayIPv4(slot int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, 0, byte(1 + slot)}) }

// gatewayIPv4s lists every slot's address, for nft sets and certificates.
func gatewayIPv4s() []string {
	out := make([]string, GatewaySlots)
	for i := range out {
		out[i] = GatewayIPv4(i).String()
	}
	return out
}

// MaxNodes bounds Options.Nodes: node i owns 198.18.0.(10+i), and pod-IP generations
// 1..5 use 198.18.0.(10+i+40*g), which must stay below .255 and not collide.
const MaxNodes = 39

// nodeIPv4 is the permanent address of node i (1-based): 198.18.0.(10+i).
func nodeIPv4(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, 0, byte(10 + i)}) }

// nodeIPv6 is fd00:6e70::<10+i>, written so that node 1 is fd00:6e70::11.
func nodeIPv6(i int) netip.Addr {
	return netip.MustParseAddr(fmt.Sprintf("fd00:6e70::%d", 10+i))
}

// podIPv4 is the address of the gen-th pod on node i. Generation 0 (the first pod) uses the
// node's own address, as a pod sharing the node's namespace would; later generations (pods
// re-created by DeletePod/CreatePod or RollAgents) get fresh addresses, as real pods do,
// cycling through five blocks: 198.18.0.(10+i+40*g').
func podIPv4(i, gen int) netip.Addr {
	if gen == 0 {
		return nodeIPv4(i)
	}
	return netip.AddrFrom4([4]byte{198, 18, 0, byte(10 + i + 40*((gen-1)%5+1))})
}

// podIPv6 is fd00:6e70::<gen>:<10+i> (generation 0: the node's own address).
func podIPv6(i, gen int) netip.Addr {
	if gen == 0 {
		return nodeIPv6(i)
	}
	return netip.MustParseAddr(fmt.Sprintf("fd00:6e70::%x:%d", gen, 10+i))
}

// Names. A run owns "<prefix>-<runid>-<i>" network namespaces (workloads:
// "<prefix>-<runid>-w<k>"), the bridge "<prefix><runid>" and host-side veths
// "<prefix><runid>h<i>" (workloads: "<prefix><runid>w<k>"); at most 15 bytes with the
// default prefix "np" and a 6-hex-digit run ID.
func netnsName(prefix, runID string, i int) string { return fmt.Sprintf("%s-%s-%d", prefix, runID, i) }
func bridgeName(prefix, runID string) string       { return prefix + runID }
func hostVethName(prefix, runID string, i int) string {
	return fmt.Sprintf("%s%sh%d", prefix, runID, i)
}

var prefixRE = regexp.MustCompile(`^[a-z]{1,4}$`)

func leftoverPatterns(prefix string) (netns, link *regexp.Regexp) {
	q := regexp.QuoteMeta(prefix)
	return regexp.MustCompile(`^` + q + `-[0-9a-f]{6}-w?[0-9]+$`),
		regexp.MustCompile(`^` + q + `[0-9a-f]{6}([hw][0-9]+)?$`)
}

// run executes a command (ip, nft) and returns its combined output in the error.
func run(ctx context.Context, stdin []byte, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = cleanEnv()
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func ip(ctx context.Context, args ...string) error { return run(ctx, nil, "ip", args...) }

// cleanEnv is the environment of every child process: a fixed PATH and nothing inherited
// (no proxies, no KUBECONFIG of the caller).
func cleanEnv() []string {
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C"}
}

// hostSysctl writes a sysctl of the calling process's (host) network namespace.
func hostSysctl(name, value string) error {
	p := "/proc/sys/" + strings.ReplaceAll(name, ".", "/")
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%q: %w", name, value, err)
	}
	return nil
}

// nsSysctl writes a sysctl inside the named network namespace.
func nsSysctl(netns, name, value string) error {
	return inNetns(netns, func() error { return hostSysctl(name, value) })
}

// The kernel's neighbour tables (ARP, NDP) are one per kernel, shared by every network
// namespace, and capped by net.ipv{4,6}.neigh.default.gc_thresh{1,2,3} (128/512/1024 by
// default), which only the host namespace can set. A real node has a table of its own; N
// simulated nodes share one. Past about 25 nodes a healthy mesh wants more IPv6 entries
// than 1024 (each namespace holds a global and a link-local entry per peer it talks to), the
// kernel counts "table_fulls" in /proc/net/stat/ndisc_cache and drops the packets that needed
// a new entry: a third of the IPv6 echoes of a healthy 30-node run were lost that way while
// IPv4 (no link-local entries) stayed under the cap. sizeNeighbourTables gives the shared
// table what N real nodes would have between them, N times the default budget of one node,
// and returns a function that restores the previous values.
func sizeNeighbourTables(nodes int) (restore func() error, err error) {
	type setting struct{ name, old string }
	var changed []setting
	restore = func() error {
		var errs []error
		for i := len(changed) - 1; i >= 0; i-- {
			errs = append(errs, hostSysctl(changed[i].name, changed[i].old))
		}
		return errors.Join(errs...)
	}
	// Largest first when raising, so gc_thresh1 <= gc_thresh2 <= gc_thresh3 holds throughout.
	for _, fam := range []string{"ipv4", "ipv6"} {
		for _, t := range []struct {
			name string
			base int
		}{{"gc_thresh3", 1024}, {"gc_thresh2", 512}, {"gc_thresh1", 128}} {
			name := "net." + fam + ".neigh.default." + t.name
			raw, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
			if err != nil {
				return restore, fmt.Errorf("sysctl %s: %w", name, err)
			}
			old := strings.TrimSpace(string(raw))
			cur, err := strconv.Atoi(old)
			if err != nil {
				return restore, fmt.Errorf("sysctl %s=%q: %w", name, old, err)
			}
			want := t.base * max(nodes, 1)
			if cur >= want {
				continue
			}
			if err := hostSysctl(name, strconv.Itoa(want)); err != nil {
				return restore, err
			}
			changed = append(changed, setting{name, old})
		}
	}
	return restore, nil
}

// createBridge creates the run's bridge with the host addresses.
func createBridge(ctx context.Context, br string) error {
	if err := ip(ctx, "link", "add", br, "type", "bridge", "mcast_snooping", "0", "stp_state", "0"); err != nil {
		return err
	}
	if err := hostSysctl("net.ipv6.conf."+br+".accept_dad", "0"); err != nil {
		return err
	}
	if err := ip(ctx, "addr", "add", HostIPv4.String()+"/24", "dev", br); err != nil {
		return err
	}
	for slot := 1; slot < GatewaySlots; slot++ {
		if err := ip(ctx, "addr", "add", GatewayIPv4(slot).String()+"/32", "dev", br); err != nil {
			return err
		}
	}
	if err := ip(ctx, "addr", "add", HostIPv6.String()+"/64", "dev", br, "nodad"); err != nil {
		return err
	}
	return ip(ctx, "link", "set", br, "up")
}

// createNodeNetns creates node i's namespace, its veth into the bridge and its addresses.
// There is deliberately no default route: the namespace reaches only the simulated network
// (and the host side of the bridge) through the connected routes of eth0, and the Service
// CIDR through eth0 (played by services.go's DNAT rules).
func createNodeNetns(ctx context.Context, netns, br, hostVeth string, v4, v6 netip.Addr) error {
	return createPodNetns(ctx, netns, br, hostVeth, "", v4, v6)
}

// createPodNetns creates a pod network namespace (a node's, which doubles as its agent
// pod's, or a workload's): the veth into the bridge (eth0 gets mac when set), the
// addresses, the sysctls and the routes.
func createPodNetns(ctx context.Context, netns, br, hostVeth, mac string, v4, v6 netip.Addr) error {
	if err := ip(ctx, "netns", "add", netns); err != nil {
		return err
	}
	for _, kv := range [][2]string{
		{"net.ipv6.conf.all.accept_dad", "0"},
		{"net.ipv6.conf.default.accept_dad", "0"},
		// Unprivileged ICMP ("ping" datagram sockets) for every group, as the agent pod's
		// securityContext.sysctls sets it.
		{"net.ipv4.ping_group_range", "0 2147483647"},
	} {
		if err := nsSysctl(netns, kv[0], kv[1]); err != nil {
			return err
		}
	}
	peer := []string{"peer", "name", "eth0"}
	if mac != "" {
		peer = append(peer, "address", mac)
	}
	if err := ip(ctx, append(append([]string{"link", "add", hostVeth, "type", "veth"}, peer...), "netns", netns)...); err != nil {
		return err
	}
	// The host-side port needs no IPv6 of its own (no link-local address, no DAD).
	if err := hostSysctl("net.ipv6.conf."+hostVeth+".disable_ipv6", "1"); err != nil {
		return err
	}
	if err := ip(ctx, "link", "set", hostVeth, "master", br, "up"); err != nil {
		return err
	}
	if err := nsSysctl(netns, "net.ipv6.conf.eth0.accept_dad", "0"); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", v4.String() + "/24", "dev", "eth0"},
		{"addr", "add", v6.String() + "/64", "dev", "eth0", "nodad"},
		{"link", "set", "eth0", "up"},
		// ClusterIPs leave through eth0, so that connect() finds a route and the output
		// hook's DNAT (services.go) rewrites them to an endpoint before they go out.
		{"route", "add", ServiceCIDR.String(), "dev", "eth0"},
	} {
		if err := ip(ctx, append([]string{"-n", netns}, args...)...); err != nil {
			return err
		}
	}
	return nil
}

// addPodAddrs / delPodAddrs manage the extra addresses of later pod generations.
func addPodAddrs(ctx context.Context, netns string, v4, v6 netip.Addr) error {
	if err := ip(ctx, "-n", netns, "addr", "add", v4.String()+"/24", "dev", "eth0"); err != nil {
		return err
	}
	return ip(ctx, "-n", netns, "addr", "add", v6.String()+"/64", "dev", "eth0", "nodad")
}

func delPodAddrs(ctx context.Context, netns string, v4, v6 netip.Addr) error {
	err4 := ip(ctx, "-n", netns, "addr", "del", v4.String()+"/24", "dev", "eth0")
	err6 := ip(ctx, "-n", netns, "addr", "del", v6.String()+"/64", "dev", "eth0")
	return errors.Join(err4, err6)
}

// deleteNetns kills whatever still runs in the namespace and deletes it (its veth goes
// with it).
func deleteNetns(ctx context.Context, netns string) error {
	killNetnsPids(ctx, netns)
	return ip(ctx, "netns", "delete", netns)
}

func killNetnsPids(ctx context.Context, netns string) {
	out, err := exec.CommandContext(ctx, "ip", "netns", "pids", netns).Output()
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// SweepLeftovers removes what crashed runs with this name prefix left behind: processes in
// and network namespaces named "<prefix>-<6 hex>-<n>" (nodes) and "<prefix>-<6 hex>-w<k>"
// (workloads), and host links named "<prefix><6 hex>" / "<prefix><6 hex>h<n>" /
// "<prefix><6 hex>w<k>" (bridges and veths). nft tables (faults, Services) live inside the
// namespaces and go with them. It refuses to run while another cluster holds the host-wide
// lock (a live run is not a leftover); Start sweeps by itself once it holds the lock.
func SweepLeftovers(prefix string) error {
	lk, err := tryLock()
	if err != nil {
		return err
	}
	defer lk.release()
	return sweep(context.Background(), prefix, func(string, ...any) {})
}

func sweep(ctx context.Context, prefix string, logf func(string, ...any)) error {
	if !prefixRE.MatchString(prefix) {
		return fmt.Errorf("simcluster: prefix %q must be 1-4 lower-case letters", prefix)
	}
	nsRE, linkRE := leftoverPatterns(prefix)
	var errs []error
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if nsRE.MatchString(e.Name()) {
			logf("simcluster: sweeping leftover network namespace %s", e.Name())
			if err := deleteNetns(ctx, e.Name()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	links, _ := os.ReadDir("/sys/class/net")
	// Veths first (they may be gone with their namespace already), then bridges.
	for _, pass := range []bool{false, true} {
		for _, l := range links {
			name := l.Name()
			if !linkRE.MatchString(name) || isBridge(name) != pass {
				continue
			}
			if _, err := os.Stat(filepath.Join("/sys/class/net", name)); err != nil {
				continue
			}
			logf("simcluster: sweeping leftover link %s", name)
			if err := ip(ctx, "link", "delete", name); err != nil && !linkGone(name) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// linkGone reports whether a link has disappeared (e.g. with its namespace, meanwhile).
func linkGone(link string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", link))
	return os.IsNotExist(err)
}

func isBridge(link string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", link, "bridge"))
	return err == nil
}

// addressHolder is a host interface holding an address of the plan.
type addressHolder struct{ link, addr string }

// addressHolders lists the host interfaces that hold addresses overlapping the plan.
func addressHolders() ([]addressHolder, error) {
	out, err := exec.Command("ip", "-o", "addr", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("ip addr show: %w", err)
	}
	var hs []addressHolder
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] != "inet" && f[i] != "inet6" {
				continue
			}
			p, err := netip.ParsePrefix(f[i+1])
			if err != nil {
				continue
			}
			if p.Overlaps(Prefix4) || p.Overlaps(Prefix6) {
				hs = append(hs, addressHolder{link: strings.TrimSuffix(f[1], ":"), addr: f[i+1]})
			}
		}
	}
	return hs, nil
}

// runBridgeRE matches a bridge name any run gives ("<1-4 lower-case letters><6 hex>").
var runBridgeRE = regexp.MustCompile(`^[a-z]{1,4}[0-9a-f]{6}$`)

// clearAddressPlan sweeps the runs whose bridges still hold the plan's addresses, whatever
// their prefix, then fails if anything else holds them. The caller holds the host-wide
// lock, so such a run is not live: it crashed, or its host was stopped under it (a
// snapshotted CI machine keeps links and namespaces but not processes). Sweeping only the
// caller's own prefix let a crashed real-node run ("npr") block every simulated start.
func clearAddressPlan(ctx context.Context, logf func(string, ...any)) error {
	hs, err := addressHolders()
	if err != nil {
		return err
	}
	swept := map[string]bool{}
	for _, h := range hs {
		if !runBridgeRE.MatchString(h.link) || !isBridge(h.link) {
			continue
		}
		prefix := h.link[:len(h.link)-6]
		if swept[prefix] {
			continue
		}
		swept[prefix] = true
		logf("simcluster: %s holds %s; sweeping the leftovers of prefix %q", h.link, h.addr, prefix)
		if err := sweep(ctx, prefix, logf); err != nil {
			return fmt.Errorf("simcluster: sweep leftovers of prefix %q: %w", prefix, err)
		}
	}
	return checkAddressesFree()
}

// checkAddressesFree fails when some interface already holds the host addresses (one
// that is not a run's bridge, which clearAddressPlan would have swept): the plan would be
// ambiguous.
func checkAddressesFree() error {
	hs, err := addressHolders()
	if err != nil {
		return err
	}
	if len(hs) > 0 {
		return fmt.Errorf("simcluster: %s already has %s (overlapping %s / %s); remove it (make sweep removes a crashed run's)", hs[0].link, hs[0].addr, Prefix4, Prefix6)
	}
	return nil
}

// hostLock serialises clusters on one host: they all use the same address plan.
type hostLock struct{ f *os.File }

func lockPath() string {
	if st, err := os.Stat("/run/lock"); err == nil && st.IsDir() {
		return "/run/lock/netpulse-simcluster.lock"
	}
	return filepath.Join(os.TempDir(), "netpulse-simcluster.lock")
}

func openLock() (*os.File, error) {
	return os.OpenFile(lockPath(), os.O_CREATE|os.O_RDWR, 0o644)
}

func lockHolder(f *os.File) string {
	b := make([]byte, 64)
	n, _ := f.ReadAt(b, 0)
	return strings.TrimSpace(string(b[:n]))
}

func (l *hostLock) markOwner() {
	_ = l.f.Truncate(0)
	_, _ = l.f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
}

// acquireLock waits (polling, so ctx and timeout are honoured) for the host-wide lock.
func acquireLock(ctx context.Context, timeout time.Duration, logf func(string, ...any)) (*hostLock, error) {
	f, err := openLock()
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	logged := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			l := &hostLock{f: f}
			l.markOwner()
			return l, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("simcluster: lock %s: %w", f.Name(), err)
		}
		if !logged {
			logf("simcluster: waiting for %s (another simulated cluster is running, pid %s)", f.Name(), lockHolder(f))
			logged = true
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("simcluster: another simulated cluster (pid %s) still holds %s after %v", lockHolder(f), lockPath(), timeout)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func tryLock() (*hostLock, error) {
	f, err := openLock()
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := lockHolder(f)
		f.Close()
		return nil, fmt.Errorf("simcluster: a simulated cluster is running (pid %s holds %s); not sweeping", holder, lockPath())
	}
	return &hostLock{f: f}, nil
}

func (l *hostLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Truncate(0)
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}

// NeighbourTableFulls returns how often the kernel's ARP (IPv4) and NDP (IPv6) tables were
// full since boot: the table_fulls column of /proc/net/stat/{arp,ndisc}_cache summed over
// its per-CPU lines. Each time, the packet that needed a new neighbour entry was dropped.
// The tables are per kernel, so the figures cover every simulated node at once (and
// anything else on the host).
func NeighbourTableFulls() (ipv4, ipv6 uint64, err error) {
	read := func(file string) (uint64, error) {
		raw, err := os.ReadFile(file)
		if err != nil {
			return 0, err
		}
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		if len(lines) < 2 {
			return 0, fmt.Errorf("%s: no per-CPU lines", file)
		}
		col := slices.Index(strings.Fields(lines[0]), "table_fulls")
		if col < 0 {
			return 0, fmt.Errorf("%s: no table_fulls column", file)
		}
		var total uint64
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			if col >= len(f) {
				return 0, fmt.Errorf("%s: short line %q", file, l)
			}
			v, err := strconv.ParseUint(f[col], 16, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", file, err)
			}
			total += v
		}
		return total, nil
	}
	if ipv4, err = read("/proc/net/stat/arp_cache"); err != nil {
		return 0, 0, err
	}
	ipv6, err = read("/proc/net/stat/ndisc_cache")
	return ipv4, ipv6, err
}
