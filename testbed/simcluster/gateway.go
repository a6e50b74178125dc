// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package simcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/netpulse/netpulse/testbed/kubetest"
)

// GatewayOptions configure a gateway collector in the host's network namespace.
type GatewayOptions struct {
	// Name is POD_NAME (and the leader-election identity): default "netpulse-gateway-0".
	Name string
	// Slot is the gateway slot (0..GatewaySlots-1): POD_IP is GatewayIPv4(Slot), where the
	// shipped configuration binds every port. Gateway shards run in slots of their own.
	Slot int
	// Config is the collector configuration (default deploy/agent-gateway/config/gateway.yaml).
	Config string
	// ExtraConfigs are merged over Config in order (more --config flags; a later file's
	// lists replace the earlier ones').
	ExtraConfigs []string
	// Env adds or overrides environment variables.
	Env map[string]string
	// ReadyURL is polled until it answers 2xx/3xx before StartGateway returns; default the
	// health_check extension of gateway.yaml (http://198.18.0.1:13133/); "-" does not wait.
	ReadyURL string
	// ReadyTimeout bounds that wait (default 90s).
	ReadyTimeout time.Duration
	// RelayAudience, when set, gives the gateway a token of its own pod for this audience
	// (NETPULSE_RELAY_TOKEN_FILE) and the gateway CA (NETPULSE_RELAY_CA_FILE): what a
	// relaying shard (the chart's gateway.relay) authenticates to the other shards with.
	// The pod is not scheduled, so the token names no node. It lives an hour and is not
	// renewed.
	RelayAudience string
}

// Gateway is a running gateway collector. Like a container with restartPolicy Always, a
// gateway that exits on its own (a lost writer Lease is fatal, for one) is started again
// with the same name and environment after a back-off of 1 s, doubling up to 10 s.
type Gateway struct {
	Name string
	// Endpoint is the OTLP/gRPC address agents send to (HostIPv4:4317, gateway.yaml's port).
	Endpoint string

	mu       sync.Mutex
	proc     *Process
	restarts int
	stopped  bool
	stop     chan struct{}
	start    func() (*Process, error)
	logf     func(string, ...any)
}

// Process is the gateway's current process (a new one after each restart).
func (g *Gateway) Process() *Process {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.proc
}

// Restarts is how often the gateway exited on its own and was started again.
func (g *Gateway) Restarts() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.restarts
}

// supervise restarts the gateway whenever its process exits and the harness did not stop it.
func (g *Gateway) supervise() {
	backoff := time.Second
	for {
		p := g.Process()
		<-p.Done()
		started := time.Now()
		select {
		case <-g.stop:
			return
		case <-time.After(backoff):
		}
		g.logf("simcluster: gateway %s exited on its own (%v); restarting it", g.Name, p.Err())
		np, err := g.start()
		g.mu.Lock()
		if g.stopped {
			g.mu.Unlock()
			if err == nil {
				_ = np.Stop(0)
			}
			return
		}
		if err != nil {
			g.mu.Unlock()
			g.logf("simcluster: gateway %s: restart failed: %v", g.Name, err)
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		g.proc = np
		g.restarts++
		g.mu.Unlock()
		if time.Since(started) > 30*time.Second {
			backoff = time.Second
		} else {
			backoff = min(2*backoff, 10*time.Second)
		}
	}
}

// halt stops supervising and stops the current process (SIGTERM, SIGKILL after grace).
func (g *Gateway) halt(grace time.Duration) error {
	g.mu.Lock()
	if !g.stopped {
		g.stopped = true
		close(g.stop)
	}
	p := g.proc
	g.mu.Unlock()
	return p.Stop(grace)
}

// StartGateway runs a collector with opts.Config on the host side of the bridge, with the
// environment the gateway Deployment gives it (POD_IP=198.18.0.1, POD_NAME,
// POD_NAMESPACE=netpulse) plus NETPULSE_K8S_AUTH=kubeConfig and KUBECONFIG = the
// netpulse-gateway service account's kubeconfig. Point agents at its Endpoint.
func (c *Cluster) StartGateway(ctx context.Context, opts GatewayOptions) (*Gateway, error) {
	if c.opts.Collector == "" {
		return nil, errors.New("simcluster: Options.Collector (the otelcol-netpulse binary) is required to run a gateway")
	}
	if opts.Name == "" {
		opts.Name = "netpulse-gateway-0"
	}
	if opts.Config == "" {
		opts.Config = filepath.Join(c.opts.RepoRoot, "deploy", "agent-gateway", "config", "gateway.yaml")
	}
	if opts.Slot < 0 || opts.Slot >= GatewaySlots {
		return nil, fmt.Errorf("simcluster: gateway slot %d out of range [0, %d)", opts.Slot, GatewaySlots)
	}
	podIP := GatewayIPv4(opts.Slot).String()
	if opts.ReadyURL == "" {
		opts.ReadyURL = "http://" + net.JoinHostPort(podIP, "13133") + "/"
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 90 * time.Second
	}
	env := mergeEnv(append(cleanEnv(),
		"POD_NAME="+opts.Name,
		"POD_NAMESPACE="+Namespace,
		"POD_IP="+podIP,
		"GOMEMLIMIT=400MiB",
		"NETPULSE_K8S_AUTH=kubeConfig",
		"KUBECONFIG="+c.GatewayKubeconfig,
		"NETPULSE_TLS_CERT_FILE="+c.gatewayTLS.CertFile,
		"NETPULSE_TLS_KEY_FILE="+c.gatewayTLS.KeyFile,
	), opts.Env)
	if err := c.createGatewayPod(ctx, opts.Name); err != nil {
		return nil, err
	}
	if opts.RelayAudience != "" {
		pod, err := c.Client.CoreV1().Pods(Namespace).Get(ctx, opts.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("simcluster: gateway pod %s: %w", opts.Name, err)
		}
		path := filepath.Join(c.Dir, "tokens", "relay-"+opts.Name)
		if _, err := c.writePodToken(ctx, pod, projectedToken{audience: opts.RelayAudience, seconds: 3600}, path); err != nil {
			return nil, err
		}
		env = mergeEnv(env, map[string]string{"NETPULSE_RELAY_TOKEN_FILE": path, "NETPULSE_RELAY_CA_FILE": c.gatewayTLS.CAFile})
	}
	logPath := filepath.Join(c.Dir, "logs", "gateway-"+opts.Name+".log")
	start := func() (*Process, error) {
		argv := []string{c.opts.Collector, "--config", opts.Config}
		for _, extra := range opts.ExtraConfigs {
			argv = append(argv, "--config", extra)
		}
		return startProcess("gateway "+opts.Name, "", argv, env, logPath)
	}
	proc, err := start()
	if err != nil {
		return nil, err
	}
	g := &Gateway{Name: opts.Name, Endpoint: net.JoinHostPort(podIP, strconv.Itoa(GatewayOTLPPort)),
		proc: proc, stop: make(chan struct{}), start: start, logf: c.logf}
	go g.supervise()
	c.mu.Lock()
	c.gateways = append(c.gateways, g)
	c.mu.Unlock()
	c.logf("simcluster: gateway %s pid %d (%s)", opts.Name, proc.Pid(), opts.Config)
	if opts.ReadyURL == "-" {
		return g, nil
	}
	ctx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()
	for !probeOnce(ctx, opts.ReadyURL) {
		if proc.Exited() {
			_ = g.halt(0) // a gateway that cannot start is not restarted
			return g, fmt.Errorf("simcluster: gateway %s exited: %v\n%s", opts.Name, proc.Err(), proc.LogTail(40))
		}
		select {
		case <-ctx.Done():
			return g, fmt.Errorf("simcluster: gateway %s not ready at %s: %w\n%s", opts.Name, opts.ReadyURL, ctx.Err(), proc.LogTail(40))
		case <-time.After(200 * time.Millisecond):
		}
	}
	return g, nil
}

// StopGateway stops a gateway (SIGTERM, then SIGKILL after 10 s) and forgets it.
func (c *Cluster) StopGateway(g *Gateway) error {
	c.forgetGateway(g)
	return g.halt(10 * time.Second)
}

// KillGateway kills a gateway with SIGKILL at once (a crash: no Lease release, no flush)
// and forgets it.
func (c *Cluster) KillGateway(g *Gateway) error {
	c.forgetGateway(g)
	return g.halt(0)
}

func (c *Cluster) forgetGateway(g *Gateway) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.gateways {
		if x == g {
			c.gateways = append(c.gateways[:i], c.gateways[i+1:]...)
			break
		}
	}
}

// createGatewayPod creates the Pod object a gateway replica would have, from the deploy/
// Deployment's template, so the exporter can label it as the leader (the gateway Service
// selects on that label). No scheduler runs: the pod stays Pending; only its object matters.
func (c *Cluster) createGatewayPod(ctx context.Context, name string) error {
	objs, err := kubetest.DecodeFile(filepath.Join(c.opts.RepoRoot, "deploy", "agent-gateway", "gateway-deployment.yaml"))
	if err != nil {
		return err
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
			return err
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: d.Spec.Template.Labels},
			Spec:       d.Spec.Template.Spec,
		}
		if _, err := c.Client.CoreV1().Pods(Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("simcluster: create gateway pod %s: %w", name, err)
		}
		return nil
	}
	return errors.New("simcluster: no Deployment in deploy/agent-gateway/gateway-deployment.yaml")
}
