// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package realcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/netpulse/netpulse/testbed/childproc"
	"github.com/netpulse/netpulse/testbed/kubetest"
	"github.com/netpulse/netpulse/testbed/simcluster"
)

// Prefix names a run's network namespaces ("npr-<run>-<i>"), bridge and veths, so that
// simcluster.Sweep recognises a crashed run's leftovers; cgroups are "npr-<run>-<i>" too.
const Prefix = "npr"

// BaseDir holds every run's directory (kubelet roots, containerd roots, logs): on the
// root file system, since containerd's overlay snapshots need one that overlayfs accepts.
const BaseDir = "/var/lib/netpulse-realnodes"

// Options tune a cluster. The zero value is a 3-node cluster in 2 zones.
type Options struct {
	// Nodes (default 3, at most MaxNodes) and Zones (default 2): node i is in zone
	// "zone-<a+(i-1)%Zones>" (the topology.kubernetes.io/zone label its kubelet sets).
	Nodes, Zones int
	// Images are extra image archives (docker/OCI, as `make image` writes) imported into
	// every node's containerd, e.g. netpulse's.
	Images []string
	// LockTimeout bounds the wait for another cluster on this host (default 10 min).
	LockTimeout time.Duration
	// StartTimeout bounds the whole start (default 5 min).
	StartTimeout time.Duration
	// NetworkPolicy runs a NetworkPolicy engine on every node: SIG Network's
	// kube-network-policies (bin/realnode/kube-network-policies, tools/netpol), started in
	// the node's network namespace after its kube-proxy, with its own identity
	// (system:kube-network-policies: list and watch pods, namespaces, networkpolicies and
	// nodes). Without it, as the bridge CNI alone, NetworkPolicies are admitted and
	// enforced by nothing.
	NetworkPolicy bool
	// KeepDir keeps the run directory (logs) after Stop.
	KeepDir bool
	// Logf receives progress lines (default: discarded).
	Logf func(format string, args ...any)
}

// Cluster is a running control plane with real nodes.
type Cluster struct {
	ControlPlane *kubetest.ControlPlane
	Nodes        []*Node
	Bins         Binaries
	RunID        string
	Dir          string
	Bridge       string
	// Kubeconfig is an admin kubeconfig (for helm and kubectl).
	Kubeconfig string

	opts      Options
	logf      func(string, ...any)
	lock      *simcluster.HostLock
	scheduler *childproc.Process
	started   time.Time
	cpDir     string
	stopOnce  sync.Once
	stopErr   error
}

// Start brings up the control plane, the scheduler and every node, waits until every node
// is Ready, and deploys cluster DNS. On error what was started is torn down, and the error
// names the component that failed with its log tail.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	if opts, err = opts.withDefaults(); err != nil {
		return nil, err
	}
	bins, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	if opts.NetworkPolicy {
		if _, err := os.Stat(bins.KubeNetworkPolicies); err != nil {
			return nil, fmt.Errorf("realcluster: missing %s (run `make node-bins`, or set %s)", bins.KubeNetworkPolicies, EnvBinDir)
		}
	}
	lock, err := simcluster.LockHost(ctx, opts.LockTimeout, opts.Logf)
	if err != nil {
		return nil, err
	}
	c = &Cluster{opts: opts, logf: opts.Logf, lock: lock, Bins: bins, started: time.Now()}
	defer func() {
		if err != nil {
			if stopErr := c.Stop(); stopErr != nil {
				err = errors.Join(err, fmt.Errorf("cleanup after failed start: %w", stopErr))
			}
			c = nil
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	if err = Sweep(ctx, c.logf); err != nil {
		return c, err
	}
	if err = simcluster.ClearAddressPlan(ctx, c.logf); err != nil {
		return c, err
	}
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	c.RunID = hex.EncodeToString(rnd[:])
	c.Dir = filepath.Join(BaseDir, c.RunID)
	if err = os.MkdirAll(c.Dir, 0o755); err != nil {
		return c, err
	}
	c.logf("realcluster: run %s in %s", c.RunID, c.Dir)

	c.Bridge = simcluster.BridgeName(Prefix, c.RunID)
	if err = simcluster.CreateBridge(ctx, c.Bridge); err != nil {
		return c, err
	}
	if err = c.setupNodes(ctx); err != nil {
		return c, err
	}

	if err = c.startControlPlane(ctx); err != nil {
		return c, err
	}

	proxyCert, proxyKey, err := c.ControlPlane.IssueClientCert("system:kube-proxy")
	if err != nil {
		return c, err
	}
	proxyKubeconfig := filepath.Join(c.Dir, "kube-proxy.kubeconfig")
	if err = kubetest.WriteKubeconfig(&rest.Config{Host: c.ControlPlane.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: c.ControlPlane.CACertPEM(), CertData: proxyCert, KeyData: proxyKey}}, proxyKubeconfig); err != nil {
		return c, err
	}
	images := append([]string{bins.PauseArchive, bins.CoreDNSArchive}, opts.Images...)
	if err = c.startNodes(ctx, images); err != nil {
		return c, err
	}
	netpolKubeconfig := ""
	if opts.NetworkPolicy {
		if netpolKubeconfig, err = c.networkPolicyIdentity(ctx); err != nil {
			return c, err
		}
	}
	if err = c.startKubelets(ctx, proxyKubeconfig, netpolKubeconfig); err != nil {
		return c, err
	}
	cs, err := c.Clientset()
	if err != nil {
		return c, err
	}
	if err = c.waitNodesReady(ctx, cs, 2*time.Minute); err != nil {
		return c, err
	}
	c.logf("realcluster: %d nodes Ready after %v", len(c.Nodes), time.Since(c.started).Round(time.Second))
	if err = c.deployDNS(ctx, cs); err != nil {
		return c, err
	}
	c.logf("realcluster: cluster DNS Ready after %v", time.Since(c.started).Round(time.Second))
	return c, nil
}

// withDefaults fills opts' zero fields, checks their ranges and the image archives, and
// that the harness runs as root.
func (opts Options) withDefaults() (Options, error) {
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.Zones == 0 {
		opts.Zones = 2
	}
	if opts.Nodes < 1 || opts.Nodes > MaxNodes {
		return opts, fmt.Errorf("realcluster: Nodes=%d out of range [1, %d]", opts.Nodes, MaxNodes)
	}
	if opts.LockTimeout == 0 {
		opts.LockTimeout = 10 * time.Minute
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 5 * time.Minute
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if os.Geteuid() != 0 {
		return opts, fmt.Errorf("realcluster: needs root (network namespaces, cgroups, containers); euid is %d", os.Geteuid())
	}
	for _, img := range opts.Images {
		if _, err := os.Stat(img); err != nil {
			return opts, fmt.Errorf("realcluster: image archive: %w", err)
		}
	}
	return opts, nil
}

// setupNodes names every node (zone, namespace, addresses, pod CIDRs, directories) and
// creates its network namespace on the bridge.
func (c *Cluster) setupNodes(ctx context.Context) error {
	for i := 1; i <= c.opts.Nodes; i++ {
		n := &Node{
			Index: i, Name: fmt.Sprintf("node-%d", i), Zone: fmt.Sprintf("zone-%c", 'a'+(i-1)%c.opts.Zones),
			Netns: simcluster.NetnsName(Prefix, c.RunID, i), IPv4: simcluster.NodeIPv4(i), IPv6: simcluster.NodeIPv6(i),
			PodCIDR4: podCIDR4(i), PodCIDR6: podCIDR6(i),
			Dir:        filepath.Join(c.Dir, fmt.Sprintf("node-%d", i)),
			CgroupRoot: "/" + simcluster.NetnsName(Prefix, c.RunID, i),
			hostVeth:   simcluster.HostVethName(Prefix, c.RunID, i),
			procs:      map[string]*childproc.Process{},
		}
		c.Nodes = append(c.Nodes, n)
	}
	for _, n := range c.Nodes {
		if err := c.setupNodeNetwork(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// startControlPlane starts the control plane and the scheduler.
func (c *Cluster) startControlPlane(ctx context.Context) error {
	// The control plane on the bridge's host address; pods reach it through the kubernetes
	// Service (kube-proxy), so its certificate names the Service's ClusterIP and the lease
	// reconciler publishes the endpoint. Node authorization and NodeRestriction bind each
	// kubelet to its own node, as on any cluster.
	// etcd fsyncs every write: on tmpfs, as kubetest keeps its own directories.
	cpDir := filepath.Join("/dev/shm", Prefix+"-"+c.RunID+"-control-plane")
	if err := os.MkdirAll(cpDir, 0o700); err != nil {
		return err
	}
	c.cpDir = cpDir
	var err error
	c.ControlPlane, err = kubetest.Start(ctx, kubetest.Options{
		BindAddress:     simcluster.HostIPv4.AsSlice(),
		ExtraServingIPs: []net.IP{APIServiceIP.AsSlice()},
		Dir:             cpDir,
		Logf:            c.logf,
		Controllers:     []string{"*"},
		ExtraAPIServerFlags: []string{
			"--endpoint-reconciler-type=lease",
			"--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction",
			"--kubelet-preferred-address-types=InternalIP",
			// The API server reaches kubelets (logs, exec) as the admin (kubetest's PKI).
			"--kubelet-client-certificate=" + filepath.Join(cpDir, "admin.crt"),
			"--kubelet-client-key=" + filepath.Join(cpDir, "admin.key"),
		},
		ExtraControllerManagerFlags: []string{"--node-monitor-grace-period=20s"},
		StartTimeout:                2 * time.Minute,
	})
	if err != nil {
		return err
	}
	c.Kubeconfig = c.ControlPlane.Kubeconfig
	return c.startScheduler()
}

// startNodes starts every node's runtime at once, with the images imported.
func (c *Cluster) startNodes(ctx context.Context, images []string) error {
	errs := make(chan error, len(c.Nodes))
	for _, n := range c.Nodes {
		go func(n *Node) {
			errs <- c.startNode(ctx, n, images)
		}(n)
	}
	var startErrs []error
	for range c.Nodes {
		if e := <-errs; e != nil {
			startErrs = append(startErrs, e)
		}
	}
	return errors.Join(startErrs...)
}

func (c *Cluster) startNode(ctx context.Context, n *Node, images []string) error {
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return err
	}
	if err := createCgroupRoot(strings.TrimPrefix(n.CgroupRoot, "/")); err != nil {
		return err
	}
	if err := c.startContainerd(ctx, n); err != nil {
		return err
	}
	return c.importImages(ctx, n, images)
}

// devicePluginSocket is the kubelet's device-plugin registration socket: a fixed path, not
// under --root-dir, so every kubelet on this host binds the same one (the last one started
// holds it; no device plugin runs here). Kubelets started at the same moment race for it and
// one fails with "address already in use", so they start one after another.
const devicePluginSocket = "/var/lib/kubelet/device-plugins/kubelet.sock"

// startKubelets starts the nodes' kubelets one at a time, each once the previous one has
// bound the device-plugin socket, and each node's kube-proxy after its kubelet (kube-proxy
// reads the node's addresses from the Node object the kubelet registers), then its
// NetworkPolicy engine when netpolKubeconfig is set.
func (c *Cluster) startKubelets(ctx context.Context, proxyKubeconfig, netpolKubeconfig string) error {
	for _, n := range c.Nodes {
		before := time.Now()
		if err := c.startKubelet(ctx, n); err != nil {
			return err
		}
		err := waitFor(ctx, 30*time.Second, func() (bool, error) {
			if err := n.exited(); err != nil {
				return false, err
			}
			fi, err := os.Stat(devicePluginSocket)
			return err == nil && !fi.ModTime().Before(before), nil
		}, func() string {
			return "kubelet on " + n.Name + " did not bind " + devicePluginSocket + "\n" + n.Logs(30)
		})
		if err != nil {
			return err
		}
		if err := c.startKubeProxy(ctx, n, proxyKubeconfig); err != nil {
			return err
		}
		if netpolKubeconfig != "" {
			if err := c.startNetworkPolicy(n, netpolKubeconfig); err != nil {
				return err
			}
		}
	}
	if netpolKubeconfig != "" {
		return c.waitNetworkPolicy(ctx)
	}
	return nil
}

func (c *Cluster) startScheduler() error {
	p, err := childproc.Start(childproc.Options{Name: "kube-scheduler", Harness: "realcluster",
		Argv: []string{c.Bins.KubeScheduler, "--kubeconfig=" + c.Kubeconfig,
			"--authentication-kubeconfig=" + c.Kubeconfig, "--authorization-kubeconfig=" + c.Kubeconfig,
			"--leader-elect=false", "--secure-port=0", "--v=1"},
		Env: cleanEnv(c.Bins), LogPath: filepath.Join(c.Dir, "kube-scheduler.log"), Spawn: simcluster.Spawn})
	if err != nil {
		return err
	}
	c.scheduler = p
	return nil
}

// Clientset is an admin clientset.
func (c *Cluster) Clientset() (*kubernetes.Clientset, error) {
	cfg := rest.CopyConfig(c.ControlPlane.Config)
	return kubernetes.NewForConfig(cfg)
}

// Node returns the node by name.
func (c *Cluster) Node(name string) (*Node, error) {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("realcluster: no node %q", name)
}

// Healthy fails, naming the node and component with its log tail, when any node
// component or the scheduler has exited.
func (c *Cluster) Healthy() error {
	var errs []error
	for _, n := range c.Nodes {
		errs = append(errs, n.exited())
	}
	if c.scheduler != nil && c.scheduler.Exited() {
		errs = append(errs, fmt.Errorf("realcluster: kube-scheduler exited (%v):\n%s", c.scheduler.Err(), c.scheduler.LogTail(30)))
	}
	return errors.Join(errs...)
}

// waitNodesReady waits for every node's Ready condition.
func (c *Cluster) waitNodesReady(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) error {
	var notReady []string
	return waitFor(ctx, timeout, func() (bool, error) {
		if err := c.Healthy(); err != nil {
			return false, err
		}
		notReady = notReady[:0]
		for _, n := range c.Nodes {
			node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil || !nodeReady(node) {
				notReady = append(notReady, n.Name)
			}
		}
		return len(notReady) == 0, nil
	}, func() string {
		var b strings.Builder
		fmt.Fprintf(&b, "nodes not Ready: %s\n", strings.Join(notReady, ", "))
		for _, name := range notReady {
			if n, err := c.Node(name); err == nil {
				b.WriteString(n.Logs(25))
			}
		}
		return b.String()
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Logs returns the tails of every component's log, for failure reports.
func (c *Cluster) Logs(lines int) string {
	var b strings.Builder
	if c.ControlPlane != nil {
		b.WriteString(c.ControlPlane.Logs(lines))
	}
	b.WriteString("--- kube-scheduler ---\n" + childproc.TailFile(filepath.Join(c.Dir, "kube-scheduler.log"), lines) + "\n")
	for _, n := range c.Nodes {
		b.WriteString(n.Logs(lines))
	}
	return b.String()
}

// Stop tears everything down: node components, every container (killed through the
// nodes' cgroups), their mounts and network namespaces, the control plane, the bridge and
// the run directory (unless KeepDir). Safe to call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var errs []error
		for _, n := range c.Nodes {
			n.mu.Lock()
			errs = append(errs, n.congestion.Stop())
			n.congestion = nil
			n.mu.Unlock()
			for _, name := range []string{NetworkPolicyEngine, "kube-proxy", "kubelet"} {
				errs = append(errs, n.process(name).Stop(5*time.Second))
			}
		}
		for _, n := range c.Nodes {
			killCgroup(strings.TrimPrefix(n.CgroupRoot, "/"))
			errs = append(errs, n.process("containerd").Stop(5*time.Second))
		}
		errs = append(errs, c.scheduler.Stop(5*time.Second))
		if c.ControlPlane != nil {
			errs = append(errs, c.ControlPlane.Stop())
		}
		if c.Dir != "" {
			errs = append(errs, cleanupRun(ctx, c.Dir, c.started, c.logf))
		}
		for _, n := range c.Nodes {
			_ = simcluster.DeleteNetns(ctx, n.Netns)
			_ = run(ctx, "ip", "route", "del", n.PodCIDR4.String())
			_ = run(ctx, "ip", "-6", "route", "del", n.PodCIDR6.String())
		}
		if c.Bridge != "" {
			_ = run(ctx, "ip", "link", "del", c.Bridge)
		}
		if c.Dir != "" && !c.opts.KeepDir {
			errs = append(errs, os.RemoveAll(c.Dir))
		}
		if c.cpDir != "" && !c.opts.KeepDir {
			errs = append(errs, os.RemoveAll(c.cpDir))
		}
		c.lock.Release()
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

func goarch() string { return runtime.GOARCH }

// SetKeepDir keeps (or not) the run directory at Stop, e.g. after a failure.
func (c *Cluster) SetKeepDir(keep bool) { c.opts.KeepDir = keep }
