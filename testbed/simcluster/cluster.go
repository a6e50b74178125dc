// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package simcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/netpulse/netpulse/testbed/kubetest"
	"github.com/netpulse/netpulse/testbed/testpki"
)

// Namespace is where deploy/ puts netpulse (deploy/agent-gateway/namespace.yaml).
const Namespace = "netpulse"

// Service accounts of deploy/rbac.
const (
	AgentServiceAccount   = "netpulse-agent"
	GatewayServiceAccount = "netpulse-gateway"
)

// Options configure a simulated cluster. The zero value plus Collector is a 4-node,
// 2-zone cluster.
type Options struct {
	// Nodes is the number of simulated nodes (default 4, 2..MaxNodes).
	Nodes int
	// Zones spreads the nodes round-robin over zone-a, zone-b, ... (default 2).
	Zones int
	// Collector is the otelcol-netpulse binary; needed by StartAgents and StartGateway.
	Collector string
	// RepoRoot is the netpulse checkout whose deploy/ is applied (default: found by walking
	// up from the working directory).
	RepoRoot string
	// Prefix names the run's network namespaces and links (default "np"; 1-4 lower-case
	// letters). Leftovers with this prefix are swept at start.
	Prefix string
	// Dir is the run directory (logs, kubeconfigs); default a fresh temp dir.
	Dir string
	// KeepDir keeps the run directory on Stop (default: removed, unless SetKeepDir(true)).
	KeepDir bool
	// LockTimeout bounds the wait for another simulated cluster on this host to finish
	// (default 15m): all clusters share one address plan, so they run one at a time.
	LockTimeout time.Duration
	// StartTimeout bounds Start (default 3m).
	StartTimeout time.Duration
	// Logf receives lifecycle lines (default: discarded).
	Logf func(format string, args ...any)
}

// Node is a simulated node: a network namespace with one veth into the bridge.
type Node struct {
	Index int    // 1-based
	Name  string // node-<Index>: the Node object and NODE_NAME
	Zone  string // topology.kubernetes.io/zone
	Netns string // named network namespace (/run/netns/<Netns>)
	// IPv4 and IPv6 are the node's permanent addresses (its InternalIPs).
	IPv4, IPv6 netip.Addr
}

// Cluster is a running simulated cluster.
type Cluster struct {
	// RunID is the random 6-hex-digit identity of this run (in every name it creates).
	RunID string
	// Dir holds the run's logs and kubeconfigs.
	Dir string
	// ControlPlane is the local etcd + kube-apiserver + kube-controller-manager, listening
	// on HostIPv4.
	ControlPlane *kubetest.ControlPlane
	// Client and Dynamic are admin clients.
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// AdminConfig is the admin client configuration.
	AdminConfig *rest.Config
	// AdminKubeconfig is an admin kubeconfig file in Dir (for kubectl).
	AdminKubeconfig string
	// AgentKubeconfig and GatewayKubeconfig hold bound service-account tokens of
	// netpulse-agent and netpulse-gateway: they can do only what deploy/rbac grants.
	AgentKubeconfig   string
	GatewayKubeconfig string
	// Bridge is the host bridge's name.
	Bridge string

	opts     Options
	logf     func(string, ...any)
	lock     *hostLock
	nodes    []*nodeState
	byName   map[string]*nodeState
	mu       sync.Mutex
	agentOpt *AgentOptions
	gateways []*Gateway
	procs    []*Process // every agent collector started, for Logs
	// gatewayTLS is the gateway's serving certificate and its CA (setupGatewayTLS).
	gatewayTLS *testpki.Serving
	// gwAPIProxy carries the gateways' API traffic (GatewayKubeconfig names it).
	gwAPIProxy *apiProxy
	// restoreNeighbourTables puts back the host's neighbour-table limits (sizeNeighbourTables).
	restoreNeighbourTables func() error
	keepDir                bool
	ownDir                 bool

	// wlMu guards workloads (by slot; StartWorkload) and their netnsUp.
	wlMu      sync.Mutex
	workloads [MaxWorkloads]*Workload
	// svc plays kube-proxy for the Services of CreateService.
	svc serviceProxy

	kubeletStop chan struct{}
	kubeletDone chan struct{}
	stopOnce    sync.Once
	stopErr     error
}

// Start creates the bridge, the node namespaces and the control plane, applies deploy/
// (CRDs, namespace, RBAC, the agent DaemonSet and its ConfigMaps), creates the Node objects
// and mints the service-account kubeconfigs. Agents start with StartAgents. On error
// everything already created is removed.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	if opts, err = opts.withDefaults(); err != nil {
		return nil, err
	}

	lock, err := acquireLock(ctx, opts.LockTimeout, opts.Logf)
	if err != nil {
		return nil, err
	}
	c = &Cluster{opts: opts, logf: opts.Logf, lock: lock, byName: map[string]*nodeState{}, keepDir: opts.KeepDir}
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

	if err = sweep(ctx, opts.Prefix, c.logf); err != nil {
		return c, fmt.Errorf("simcluster: sweep leftovers: %w", err)
	}
	if err = clearAddressPlan(ctx, c.logf); err != nil {
		return c, err
	}
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	c.RunID = hex.EncodeToString(rnd[:])
	c.Dir = opts.Dir
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "netpulse-simcluster-"+c.RunID+"-"); err != nil {
			return c, err
		}
		c.ownDir = true
	} else if err = os.MkdirAll(c.Dir, 0o755); err != nil {
		return c, err
	}
	c.logf("simcluster: run %s in %s", c.RunID, c.Dir)

	if err = c.setupNetwork(ctx); err != nil {
		return c, err
	}

	// Control plane on the bridge's host address, so agents in the namespaces reach it.
	c.ControlPlane, err = kubetest.Start(ctx, kubetest.Options{BindAddress: HostIPv4.AsSlice(), Logf: c.logf})
	if err != nil {
		return c, err
	}
	c.AdminConfig = noProxy(rest.CopyConfig(c.ControlPlane.Config))
	if c.Client, err = kubernetes.NewForConfig(c.AdminConfig); err != nil {
		return c, err
	}
	if c.Dynamic, err = dynamic.NewForConfig(c.AdminConfig); err != nil {
		return c, err
	}
	c.AdminKubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	if err = kubetest.WriteKubeconfig(c.AdminConfig, c.AdminKubeconfig); err != nil {
		return c, err
	}

	if err = c.applyDeploy(ctx); err != nil {
		return c, err
	}
	if err = c.createNodes(ctx); err != nil {
		return c, err
	}
	if err = c.setupGatewayTLS(ctx); err != nil {
		return c, err
	}
	if err = c.writeServiceAccountKubeconfigs(ctx); err != nil {
		return c, err
	}
	c.kubeletStop = make(chan struct{})
	c.kubeletDone = make(chan struct{})
	go c.kubeletLoop()
	c.logf("simcluster: ready; kubectl --kubeconfig %s get nodes,pods -A -o wide", c.AdminKubeconfig)
	return c, nil
}

// withDefaults fills opts' zero fields, checks their ranges and that the harness runs as
// root.
func (opts Options) withDefaults() (Options, error) {
	var err error
	if opts.Nodes == 0 {
		opts.Nodes = 4
	}
	if opts.Nodes < 2 || opts.Nodes > MaxNodes {
		return opts, fmt.Errorf("simcluster: Nodes=%d out of range [2, %d]", opts.Nodes, MaxNodes)
	}
	if opts.Zones == 0 {
		opts.Zones = 2
	}
	if opts.Zones < 1 || opts.Zones > 26 {
		return opts, fmt.Errorf("simcluster: Zones=%d out of range [1, 26]", opts.Zones)
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if !prefixRE.MatchString(opts.Prefix) {
		return opts, fmt.Errorf("simcluster: Prefix %q must be 1-4 lower-case letters", opts.Prefix)
	}
	if opts.LockTimeout == 0 {
		opts.LockTimeout = 15 * time.Minute
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 3 * time.Minute
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if os.Geteuid() != 0 {
		return opts, fmt.Errorf("simcluster: needs root (network namespaces, veths, a bridge, nftables); euid is %d", os.Geteuid())
	}
	if opts.RepoRoot == "" {
		if opts.RepoRoot, err = kubetest.RepoRoot(); err != nil {
			return opts, err
		}
	}
	return opts, nil
}

// writeServiceAccountKubeconfigs writes the agents' and the gateways' kubeconfigs; the
// gateways' reach the API server through a proxy the harness can cut
// (PartitionGatewayFromAPI).
func (c *Cluster) writeServiceAccountKubeconfigs(ctx context.Context) error {
	for _, sa := range []struct {
		name string
		path *string
	}{{AgentServiceAccount, &c.AgentKubeconfig}, {GatewayServiceAccount, &c.GatewayKubeconfig}} {
		cfg, err := c.ControlPlane.ServiceAccountConfig(ctx, Namespace, sa.name)
		if err != nil {
			return err
		}
		if sa.name == GatewayServiceAccount {
			u, err := url.Parse(cfg.Host)
			if err != nil {
				return err
			}
			if c.gwAPIProxy, err = startAPIProxy(net.JoinHostPort(HostIPv4.String(), "0"), u.Host); err != nil {
				return fmt.Errorf("simcluster: gateway API proxy: %w", err)
			}
			cfg.Host = "https://" + c.gwAPIProxy.Addr()
		}
		*sa.path = filepath.Join(c.Dir, sa.name+".kubeconfig")
		if err := kubetest.WriteKubeconfig(cfg, *sa.path); err != nil {
			return err
		}
	}
	return nil
}

// setupNetwork creates the bridge, then one namespace per node.
func (c *Cluster) setupNetwork(ctx context.Context) error {
	c.Bridge = bridgeName(c.opts.Prefix, c.RunID)
	restore, err := sizeNeighbourTables(c.opts.Nodes)
	c.restoreNeighbourTables = restore
	if err != nil {
		return err
	}
	if err := createBridge(ctx, c.Bridge); err != nil {
		return err
	}
	for i := 1; i <= c.opts.Nodes; i++ {
		n := &nodeState{Node: Node{
			Index: i,
			Name:  fmt.Sprintf("node-%d", i),
			Zone:  fmt.Sprintf("zone-%c", 'a'+(i-1)%c.opts.Zones),
			Netns: netnsName(c.opts.Prefix, c.RunID, i),
			IPv4:  nodeIPv4(i),
			IPv6:  nodeIPv6(i),
		}, hostVeth: hostVethName(c.opts.Prefix, c.RunID, i)}
		c.nodes = append(c.nodes, n)
		c.byName[n.Name] = n
		if err := createNodeNetns(ctx, n.Netns, c.Bridge, n.hostVeth, n.IPv4, n.IPv6); err != nil {
			return err
		}
	}
	c.logf("simcluster: bridge %s (%s, %s), %d node namespaces", c.Bridge, HostIPv4, HostIPv6, c.opts.Nodes)
	return nil
}

// noProxy makes a client configuration ignore *_PROXY variables: the harness only ever
// talks to its own addresses.
func noProxy(cfg *rest.Config) *rest.Config {
	cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	return cfg
}

// Nodes returns the simulated nodes in index order.
func (c *Cluster) Nodes() []Node {
	out := make([]Node, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Node
	}
	return out
}

// Node returns the node called name ("node-2").
func (c *Cluster) Node(name string) (Node, error) {
	n, err := c.node(name)
	if err != nil {
		return Node{}, err
	}
	return n.Node, nil
}

func (c *Cluster) node(name string) (*nodeState, error) {
	n, ok := c.byName[name]
	if !ok {
		names := make([]string, 0, len(c.byName))
		for k := range c.byName {
			names = append(names, k)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("simcluster: no node %q (have %s)", name, strings.Join(names, ", "))
	}
	return n, nil
}

// SetKeepDir decides whether Stop keeps the run directory (e.g. after a failed test).
func (c *Cluster) SetKeepDir(keep bool) {
	c.mu.Lock()
	c.keepDir = keep
	c.mu.Unlock()
}

// StopAPIServer stops kube-apiserver (etcd keeps the state).
func (c *Cluster) StopAPIServer() error { return c.ControlPlane.StopAPIServer() }

// StartAPIServer starts kube-apiserver again on the same address.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	return c.ControlPlane.StartAPIServer(ctx)
}

// RestartAPIServer stops kube-apiserver, waits downtime, and starts it again.
func (c *Cluster) RestartAPIServer(ctx context.Context, downtime time.Duration) error {
	if err := c.StopAPIServer(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-time.After(downtime):
	}
	return c.StartAPIServer(ctx)
}

// Logs returns the tails of every component's log: control plane, agents, gateways.
func (c *Cluster) Logs(lines int) string {
	var b strings.Builder
	if c.ControlPlane != nil {
		b.WriteString(c.ControlPlane.Logs(lines))
	}
	c.mu.Lock()
	procs := append([]*Process(nil), c.procs...)
	gws := append([]*Gateway(nil), c.gateways...)
	c.mu.Unlock()
	for _, p := range procs {
		fmt.Fprintf(&b, "--- %s (%s) ---\n%s\n", p.Name, p.LogPath, p.LogTail(lines))
	}
	for _, g := range gws {
		fmt.Fprintf(&b, "--- gateway %s (%s) ---\n%s\n", g.Name, g.Process().LogPath, g.Process().LogTail(lines))
	}
	return b.String()
}

// Stop removes everything the cluster created: collector processes (agents, gateways,
// sidecars), echo responders, recording servers, the control plane, network namespaces
// (nodes' and workloads', with their nft tables and veths), the bridge and (unless kept)
// the run directory; then it releases the host lock. It is idempotent and
// safe on a partly started cluster.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

func (c *Cluster) stop() error {
	var errs []error
	if c.kubeletStop != nil {
		close(c.kubeletStop)
		<-c.kubeletDone
	}
	c.stopServiceLoop()
	c.mu.Lock()
	gws := c.gateways
	c.gateways = nil
	keep := c.keepDir
	c.mu.Unlock()
	var wg sync.WaitGroup
	var emu sync.Mutex
	addErr := func(err error) {
		if err != nil {
			emu.Lock()
			errs = append(errs, err)
			emu.Unlock()
		}
	}
	for _, g := range gws {
		wg.Add(1)
		go func() { defer wg.Done(); addErr(g.halt(5 * time.Second)) }()
	}
	c.wlMu.Lock()
	wls := c.workloads
	c.wlMu.Unlock()
	for _, w := range wls {
		if w == nil {
			continue
		}
		wg.Add(1)
		go func() {
			// Sidecar, recording servers, namespace; the pod object goes with the control plane.
			defer wg.Done()
			addErr(c.teardownWorkload(context.Background(), w, false))
		}()
	}
	for _, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.mu.Lock()
			defer n.mu.Unlock()
			if n.pod != nil && n.pod.proc != nil {
				addErr(n.pod.proc.Stop(5 * time.Second))
			}
			n.responder.close()
			n.responder = nil
			_ = n.congestion.Stop()
			n.congestion = nil
		}()
	}
	wg.Wait()
	if c.gwAPIProxy != nil {
		addErr(c.gwAPIProxy.Close())
	}
	if c.ControlPlane != nil {
		addErr(c.ControlPlane.Stop())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, n := range c.nodes {
		// Deleting the veth takes both ends at once; a namespace's own cleanup is
		// asynchronous in the kernel.
		if _, err := os.Stat(filepath.Join("/sys/class/net", n.hostVeth)); err == nil {
			addErr(ip(ctx, "link", "delete", n.hostVeth))
		}
		if _, err := os.Stat(filepath.Join("/run/netns", n.Netns)); err == nil {
			addErr(deleteNetns(ctx, n.Netns))
		}
	}
	if c.Bridge != "" {
		if _, err := os.Stat(filepath.Join("/sys/class/net", c.Bridge)); err == nil {
			addErr(ip(ctx, "link", "delete", c.Bridge))
		}
	}
	if c.restoreNeighbourTables != nil {
		addErr(c.restoreNeighbourTables())
	}
	if c.lock != nil {
		// Anything this run missed (a failed half-created namespace) goes now, while the
		// lock still guarantees no other run owns such names.
		addErr(sweep(ctx, c.opts.Prefix, c.logf))
	}
	if c.Dir != "" {
		if keep {
			c.logf("simcluster: kept run directory %s", c.Dir)
		} else if c.ownDir {
			addErr(os.RemoveAll(c.Dir))
		}
	}
	c.lock.release()
	return errors.Join(errs...)
}
