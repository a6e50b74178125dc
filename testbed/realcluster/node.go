// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package realcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/netpulse/netpulse/testbed/childproc"
	"github.com/netpulse/netpulse/testbed/kubetest"
	"github.com/netpulse/netpulse/testbed/simcluster"
)

// The pod address plan: node i's pods get 198.19.i.0/24 and fd00:6e71:0:i::/64 (RFC 2544
// benchmarking space and a ULA, like the node addresses, so that nothing here is routable
// off the machine). The Service CIDR and the API server's address are testbed/kubetest's
// and testbed/simcluster's.
var (
	ClusterCIDR4 = netip.MustParsePrefix("198.19.0.0/16")
	ClusterCIDR6 = netip.MustParsePrefix("fd00:6e71::/56")
	// ClusterDNS is the kube-dns Service's ClusterIP (the tenth address of the Service CIDR,
	// as kubeadm picks it).
	ClusterDNS = netip.MustParseAddr("10.0.0.10")
	// APIServiceIP is the kubernetes Service's ClusterIP (the first address of the CIDR).
	APIServiceIP = netip.MustParseAddr("10.0.0.1")
)

// MaxNodes bounds Options.Nodes (pod CIDRs 198.19.1-254.0/24; the simulated address plan
// allows 39 node addresses).
const MaxNodes = 16

func podCIDR4(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(i), 0}), 24)
}

func podCIDR6(i int) netip.Prefix {
	return netip.MustParsePrefix(fmt.Sprintf("fd00:6e71:0:%x::/64", i))
}

// Node is one real node.
type Node struct {
	Index    int
	Name     string
	Zone     string
	Netns    string
	IPv4     netip.Addr
	IPv6     netip.Addr
	PodCIDR4 netip.Prefix
	PodCIDR6 netip.Prefix
	// Dir holds the node's kubelet root, containerd root and state, CNI configuration,
	// logs and cgroup name.
	Dir string
	// CgroupRoot is the kubelet's --cgroup-root (every pod's cgroup is below it).
	CgroupRoot string

	hostVeth string
	mu       sync.Mutex
	// congestion: Congest's shaping and sender (nil: none; under mu).
	congestion *simcluster.Congestion
	// slow: SlowAnswers' queue (nil: none; under mu).
	slow  *simcluster.InputDelay
	procs map[string]*childproc.Process // containerd, kubelet, kube-proxy, kube-network-policies
}

// ContainerdSocket is the node's CRI endpoint.
func (n *Node) ContainerdSocket() string { return filepath.Join(n.Dir, "containerd.sock") }

// Logs returns the tail of each of the node's components' logs.
func (n *Node) Logs(lines int) string {
	var b strings.Builder
	for _, name := range []string{"containerd", "kubelet", "kube-proxy", NetworkPolicyEngine} {
		if name == NetworkPolicyEngine && n.process(name) == nil {
			continue
		}
		fmt.Fprintf(&b, "--- %s %s ---\n%s\n", n.Name, name, childproc.TailFile(filepath.Join(n.Dir, name+".log"), lines))
	}
	return b.String()
}

// process returns the named component's process, if started.
func (n *Node) process(name string) *childproc.Process {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.procs[name]
}

// exited names the node's components that are not running, with their log tails.
func (n *Node) exited() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, name := range []string{"containerd", "kubelet", "kube-proxy", NetworkPolicyEngine} {
		if p := n.procs[name]; p != nil && p.Exited() {
			out = append(out, fmt.Sprintf("%s on %s exited (%v); log tail:\n%s", name, n.Name, p.Err(), p.LogTail(30)))
		}
	}
	if len(out) == 0 {
		return nil
	}
	return fmt.Errorf("realcluster: %s", strings.Join(out, "\n"))
}

// setupNetwork creates the node's namespace on the bridge, lets it forward pod traffic,
// and routes every other node's pod CIDRs through that node's address (the routes a CNI
// without an overlay, or a cloud's route table, would install). The host routes pod
// CIDRs too, so the API server answers pods.
func (c *Cluster) setupNodeNetwork(ctx context.Context, n *Node) error {
	if err := simcluster.CreateNodeNetns(ctx, n.Netns, c.Bridge, n.hostVeth, n.IPv4, n.IPv6); err != nil {
		return err
	}
	sysctls := [][2]string{
		{"net.ipv4.ip_forward", "1"},
		{"net.ipv6.conf.all.forwarding", "1"},
		// Pod to ClusterIP to a pod on the same bridge: the reply is bridged, not routed, and
		// must still pass kube-proxy's conntrack to be un-DNATed (what br_netfilter is loaded
		// for on every kubeadm node).
		{"net.bridge.bridge-nf-call-iptables", "1"},
		{"net.bridge.bridge-nf-call-ip6tables", "1"},
	}
	for _, kv := range sysctls {
		if err := simcluster.InNetns(n.Netns, func() error { return writeSysctl(kv[0], kv[1]) }); err != nil {
			return fmt.Errorf("realcluster: %s: %w", n.Name, err)
		}
	}
	for _, peer := range c.Nodes {
		if peer == n {
			continue
		}
		for _, r := range [][]string{
			{"route", "replace", peer.PodCIDR4.String(), "via", peer.IPv4.String()},
			{"-6", "route", "replace", peer.PodCIDR6.String(), "via", peer.IPv6.String()},
		} {
			if err := run(ctx, "ip", append([]string{"-n", n.Netns}, r...)...); err != nil {
				return err
			}
		}
	}
	if err := run(ctx, "ip", "route", "replace", n.PodCIDR4.String(), "via", n.IPv4.String()); err != nil {
		return err
	}
	return run(ctx, "ip", "-6", "route", "replace", n.PodCIDR6.String(), "via", n.IPv6.String())
}

func writeSysctl(name, value string) error {
	p := "/proc/sys/" + strings.ReplaceAll(name, ".", "/")
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", name, value, err)
	}
	return nil
}

// cgroupControllers are the cgroup v1 hierarchies mounted under /sys/fs/cgroup (and the
// unified one on a hybrid host): the kubelet's cgroup root must exist in each.
func cgroupHierarchies() ([]string, error) {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			continue // cpu,cpuacct-style symlinks point at a hierarchy listed on its own
		}
		out = append(out, p)
	}
	return out, nil
}

// createCgroupRoot creates the node's cgroup root in every hierarchy; the kubelet refuses
// a --cgroup-root that does not exist. cpuset needs its cpus and mems before a task can
// join a child.
func createCgroupRoot(name string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		d := filepath.Join(h, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("realcluster: cgroup %s: %w", d, err)
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return fmt.Errorf("realcluster: %s/%s: %w", d, f, err)
				}
			}
		}
	}
	return nil
}

// startContainerd writes the node's containerd configuration (its own root, state, socket,
// runc root and CNI directories; NRI off, since its socket path is host-wide) and starts it
// in the node's network namespace, where the CNI plugins it runs build the node's bridge.
func (c *Cluster) startContainerd(ctx context.Context, n *Node) error {
	cni := filepath.Join(n.Dir, "cni")
	if err := os.MkdirAll(filepath.Join(cni, "net.d"), 0o755); err != nil {
		return err
	}
	conflist := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "netpulse-real",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": filepath.Join(cni, "ipam"),
					"ranges": []any{
						[]any{map[string]any{"subnet": n.PodCIDR4.String()}},
						[]any{map[string]any{"subnet": n.PodCIDR6.String()}},
					},
					"routes": []any{map[string]any{"dst": "0.0.0.0/0"}, map[string]any{"dst": "::/0"}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, _ := json.MarshalIndent(conflist, "", "  ")
	if err := os.WriteFile(filepath.Join(cni, "net.d", "10-netpulse.conflist"), b, 0o644); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[5]q

[plugins."io.containerd.cri.v1.runtime"]
  # This machine's root lacks CAP_SYS_RESOURCE, so no process may lower its OOM score
  # (the sandbox's -998, a Guaranteed pod's -997): containerd keeps it at or above its own,
  # as it does in kind's rootless nodes.
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = %[6]q
        Root = %[7]q
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[8]q]
    conf_dir = %[9]q

[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, filepath.Join(n.Dir, "containerd", "root"), filepath.Join(n.Dir, "containerd", "state"), n.ContainerdSocket(),
		filepath.Join(n.Dir, "containerd", "ttrpc.sock"), PauseImage, c.Bins.Runc, filepath.Join(n.Dir, "runc"),
		c.Bins.CNIDir, filepath.Join(cni, "net.d"))
	path := filepath.Join(n.Dir, "containerd.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	if err := c.startNodeProcess(n, "containerd", c.Bins.Containerd, "--config", path); err != nil {
		return err
	}
	return waitFor(ctx, 30*time.Second, func() (bool, error) {
		if err := n.exited(); err != nil {
			return false, err
		}
		_, err := os.Stat(n.ContainerdSocket())
		return err == nil, nil
	}, func() string {
		return "containerd on " + n.Name + " did not open " + n.ContainerdSocket() + "\n" + n.Logs(30)
	})
}

// importImages loads the image archives into the node's containerd (the "k8s.io"
// namespace the CRI plugin uses), as `ctr images import` does on any node.
func (c *Cluster) importImages(ctx context.Context, n *Node, archives []string) error {
	for _, a := range archives {
		cmd := exec.CommandContext(ctx, c.Bins.Ctr, "--address", n.ContainerdSocket(), "-n", "k8s.io", "images", "import",
			"--platform", "linux/"+goarch(), "--no-unpack=false", a)
		cmd.Env = cleanEnv(c.Bins)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("realcluster: import %s into %s: %w\n%s", filepath.Base(a), n.Name, err, out)
		}
	}
	return nil
}

// startKubelet writes the node's kubeconfig (a client certificate for system:node:<name>,
// which the Node authorizer and NodeRestriction admission bind to this node) and its
// KubeletConfiguration, and starts the kubelet in the node's network namespace.
func (c *Cluster) startKubelet(ctx context.Context, n *Node) error {
	certPEM, keyPEM, err := c.ControlPlane.IssueClientCert("system:node:"+n.Name, "system:nodes")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(n.Dir, "kubelet.kubeconfig")
	if err := kubetest.WriteKubeconfig(&rest.Config{Host: c.ControlPlane.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: c.ControlPlane.CACertPEM(), CertData: certPEM, KeyData: keyPEM}}, kubeconfig); err != nil {
		return err
	}
	// The nodes have no upstream resolver (no network): CoreDNS answers the cluster domain
	// and nothing else; the address below is the host side of the bridge, where nothing
	// listens on port 53, so a stray query fails at once and stays on the machine.
	resolv := filepath.Join(n.Dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver "+simcluster.HostIPv4.String()+"\n"), 0o644); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[2]q}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: %[3]q
cgroupsPerQOS: true
# cgroup v1 hosts (this kind of machine): the kubelet refuses them from 1.35 unless told
# otherwise (KEP-5573).
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%[4]s
clusterDNS: [%[5]q]
clusterDomain: cluster.local
resolvConf: %[6]q
podLogsDir: %[7]q
# Several kubelets share one disk: no eviction or image garbage collection on a disk
# that other nodes (and the machine) fill.
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
nodeStatusUpdateFrequency: 5s
syncFrequency: 10s
fileCheckFrequency: 5s
rotateCertificates: false
serverTLSBootstrap: false
`, n.IPv4, c.ControlPlane.CACertFile(), n.CgroupRoot, n.ContainerdSocket(), ClusterDNS, resolv, filepath.Join(n.Dir, "pod-logs"))
	path := filepath.Join(n.Dir, "kubelet.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	return c.startNodeProcess(n, "kubelet", c.Bins.Kubelet,
		"--config="+path,
		"--kubeconfig="+kubeconfig,
		"--root-dir="+filepath.Join(n.Dir, "kubelet"),
		"--cert-dir="+filepath.Join(n.Dir, "kubelet-pki"),
		"--hostname-override="+n.Name,
		"--node-ip="+n.IPv4.String()+","+n.IPv6.String(),
		"--node-labels=topology.kubernetes.io/zone="+n.Zone,
		"--v=1",
	)
}

// startKubeProxy starts kube-proxy (nftables mode) in the node's network namespace, with
// the system:kube-proxy identity that the default node-proxier binding authorizes.
func (c *Cluster) startKubeProxy(ctx context.Context, n *Node, kubeconfig string) error {
	cfg := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %[1]q}
mode: nftables
clusterCIDR: %[2]s
hostnameOverride: %[3]s
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
# The conntrack table's size is one per kernel, shared by every node here: leave it.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, kubeconfig, ClusterCIDR4.String()+","+ClusterCIDR6.String(), n.Name)
	path := filepath.Join(n.Dir, "kube-proxy.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	return c.startNodeProcess(n, "kube-proxy", c.Bins.KubeProxy, "--config="+path, "--v=1")
}

// startNodeProcess starts a node component inside the node's network namespace only
// (nsenter --net), so that it shares the host's mount namespace with the node's other
// components, as on a real node: the kubelet's volume mounts must be visible to runc.
func (c *Cluster) startNodeProcess(n *Node, name, bin string, args ...string) error {
	argv := append([]string{c.Bins.Nsenter, "--net=/run/netns/" + n.Netns, "--", bin}, args...)
	p, err := childproc.Start(childproc.Options{Name: name + "@" + n.Name, Harness: "realcluster", Argv: argv,
		Env: cleanEnv(c.Bins), LogPath: filepath.Join(n.Dir, name+".log"), Spawn: simcluster.Spawn})
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.procs[name] = p
	n.mu.Unlock()
	return nil
}

// cleanEnv: a fixed PATH (node binaries first, so containerd finds its shim and the CNI
// plugins their peers) and nothing inherited.
func cleanEnv(b Binaries) []string {
	return []string{"PATH=" + b.Dir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C", "HOME=/root"}
}

func run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// waitFor polls cond every 250 ms until it is true, returns an error, or timeout passes
// (then the error says what did not happen, with detail()).
func waitFor(ctx context.Context, timeout time.Duration, cond func() (bool, error), detail func() string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("realcluster: %s (after %v)", detail(), timeout)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ContainerMemoryEvents reads what a container's memory cgroup (v1) remembers of its life:
// the peak usage (memory.max_usage_in_bytes, file pages included), how often usage hit
// the limit and the kernel reclaimed to stay under it (memory.failcnt), and how many of
// its processes the OOM killer ended (memory.oom_control's oom_kill, on kernels that count
// it; -1 otherwise).
func (n *Node) ContainerMemoryEvents(podUID, qosClass, containerID string) (peak, failcnt, oomKills int64, err error) {
	dir := filepath.Join("/sys/fs/cgroup/memory", n.containerCgroup(podUID, qosClass, containerID))
	readInt := func(name string) (int64, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return 0, fmt.Errorf("realcluster: %s: %w", n.Name, err)
		}
		var v int64
		_, err = fmt.Sscan(string(b), &v)
		return v, err
	}
	if peak, err = readInt("memory.max_usage_in_bytes"); err != nil {
		return 0, 0, 0, err
	}
	if failcnt, err = readInt("memory.failcnt"); err != nil {
		return 0, 0, 0, err
	}
	oomKills = -1
	oc, err := os.ReadFile(filepath.Join(dir, "memory.oom_control"))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("realcluster: %s: %w", n.Name, err)
	}
	for _, line := range strings.Split(string(oc), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			if _, err := fmt.Sscan(v, &oomKills); err != nil {
				return 0, 0, 0, fmt.Errorf("realcluster: %s: memory.oom_control: %q", n.Name, line)
			}
		}
	}
	return peak, failcnt, oomKills, nil
}

// containerCgroup is a container's cgroup below the hierarchies' roots.
func (n *Node) containerCgroup(podUID, qosClass, containerID string) string {
	rel := filepath.Join(n.CgroupRoot, "kubepods")
	switch qosClass {
	case "Burstable":
		rel = filepath.Join(rel, "burstable")
	case "BestEffort":
		rel = filepath.Join(rel, "besteffort")
	}
	return filepath.Join(rel, "pod"+podUID, containerID)
}

// ContainerUsage reads a container's memory working set (usage less inactive file pages,
// as the kubelet reports it and the OOM killer counts against the limit), its anonymous
// memory (total_rss), and its CPU time from its cgroup v1 hierarchy on this node.
func (n *Node) ContainerUsage(podUID, qosClass, containerID string) (workingSet, rss int64, cpu time.Duration, err error) {
	rel := n.containerCgroup(podUID, qosClass, containerID)
	readInt := func(p string) (int64, error) {
		b, err := os.ReadFile(p)
		if err != nil {
			return 0, err
		}
		var v int64
		_, err = fmt.Sscan(string(b), &v)
		return v, err
	}
	usage, err := readInt(filepath.Join("/sys/fs/cgroup/memory", rel, "memory.usage_in_bytes"))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("realcluster: %s: %w", n.Name, err)
	}
	stat, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", rel, "memory.stat"))
	if err != nil {
		return 0, 0, 0, err
	}
	for _, line := range strings.Split(string(stat), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		var v int64
		if _, err := fmt.Sscan(f[1], &v); err != nil {
			continue
		}
		switch f[0] {
		case "total_inactive_file":
			if v < usage {
				usage -= v
			}
		case "total_rss":
			rss = v
		}
	}
	ns, err := readInt(filepath.Join("/sys/fs/cgroup/cpuacct", rel, "cpuacct.usage"))
	if err != nil {
		return 0, 0, 0, err
	}
	return usage, rss, time.Duration(ns), nil
}
