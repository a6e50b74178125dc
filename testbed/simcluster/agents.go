// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package simcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"

	"github.com/netpulse/netpulse/internal/shard"
)

// AgentDaemonSet is the DaemonSet of deploy/agent-gateway/agent-daemonset.yaml whose pod
// template the simulated agent pods are made from.
const AgentDaemonSet = "netpulse-agent"

// AgentOptions configure the agent collectors. Everything else comes from the unchanged
// deploy/agent-gateway/config/agent.yaml and the DaemonSet's pod template.
type AgentOptions struct {
	// GatewayEndpoint (host:port) is NETPULSE_GATEWAY_ENDPOINT: the gateway slot or a test
	// OTLP sink on HostIPv4. Required.
	GatewayEndpoint string
	// GatewayEndpoints, when set, spread the agents over several gateways instead (a
	// Service's connections over its endpoints): the agent on node n gets
	// GatewayEndpoints[shard.Of(n, len)] as NETPULSE_GATEWAY_ENDPOINT.
	GatewayEndpoints []string
	// Config is the collector configuration (default deploy/agent-gateway/config/agent.yaml).
	Config string
	// ProbeInterval, ProbeTimeout and PeerGrace set NETPULSE_PROBE_INTERVAL (default 1s),
	// NETPULSE_PROBE_TIMEOUT (default 500ms; must not exceed the interval) and
	// NETPULSE_PEER_GRACE (default 0s).
	ProbeInterval, ProbeTimeout, PeerGrace time.Duration
	// Env adds or overrides environment variables of every agent.
	Env map[string]string
	// ReadyTimeout bounds the wait for a new agent's readiness probe (default 90s).
	ReadyTimeout time.Duration
}

// Agent describes the agent pod currently on a node.
type Agent struct {
	Node      string
	Zone      string
	Pod       string
	Namespace string
	UID       string
	// IPs are the pod's addresses, IPv4 first (status.podIPs).
	IPs []netip.Addr
	// Generation counts the pods created on this node (0 = the first, which uses the
	// node's own addresses).
	Generation int
	Ready      bool
	Pid        int
	LogPath    string
}

type nodeState struct {
	Node
	hostVeth string

	// mu serialises pod and fault operations on this node.
	mu        sync.Mutex
	gen       int
	pod       *agentPod
	faults    faultState
	responder *echoResponder
	// congestion: Congest's bulk sender (nil: none).
	congestion *Congestion
	// inputDelay: DelayInput's queue (nil: none).
	inputDelay *InputDelay
	snap       atomic.Pointer[Agent]
}

type agentPod struct {
	name, uid string
	gen       int
	ips       []netip.Addr
	proc      *Process
	readyURL  string
	threshold int // readiness failureThreshold
	failures  int
	ready     bool
	tracked   bool // initial readiness established; the kubelet loop owns it now
	// pod is the pod object as created; tokenPath its projected gateway token (refreshed
	// by the kubelet loop at tokenRefresh).
	pod          *corev1.Pod
	tokenPath    string
	tokenRefresh time.Time
}

func (n *nodeState) publish() {
	if n.pod == nil {
		n.snap.Store(nil)
		return
	}
	a := &Agent{
		Node: n.Name, Zone: n.Zone, Pod: n.pod.name, Namespace: Namespace, UID: n.pod.uid,
		IPs: append([]netip.Addr(nil), n.pod.ips...), Generation: n.pod.gen, Ready: n.pod.ready,
	}
	if n.pod.proc != nil {
		a.Pid, a.LogPath = n.pod.proc.Pid(), n.pod.proc.LogPath
	}
	n.snap.Store(a)
}

// StartAgents creates one agent pod per node and starts its collector inside the node's
// namespace, then waits until every agent is Ready (its readiness probe answers).
func (c *Cluster) StartAgents(ctx context.Context, opts AgentOptions) error {
	if opts.GatewayEndpoint == "" {
		return errors.New("simcluster: AgentOptions.GatewayEndpoint is required")
	}
	if c.opts.Collector == "" {
		return errors.New("simcluster: Options.Collector (the otelcol-netpulse binary) is required to run agents")
	}
	if opts.Config == "" {
		opts.Config = filepath.Join(c.opts.RepoRoot, "deploy", "agent-gateway", "config", "agent.yaml")
	}
	if opts.ProbeInterval == 0 {
		opts.ProbeInterval = time.Second
	}
	if opts.ProbeTimeout == 0 {
		opts.ProbeTimeout = 500 * time.Millisecond
	}
	if opts.ProbeTimeout > opts.ProbeInterval {
		return fmt.Errorf("simcluster: ProbeTimeout %v exceeds ProbeInterval %v", opts.ProbeTimeout, opts.ProbeInterval)
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 90 * time.Second
	}
	c.mu.Lock()
	if c.agentOpt != nil {
		c.mu.Unlock()
		return errors.New("simcluster: agents already started")
	}
	c.agentOpt = &opts
	c.mu.Unlock()

	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.mu.Lock()
			defer n.mu.Unlock()
			errs[i] = c.createPod(ctx, n)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	c.logf("simcluster: %d agents ready", len(c.nodes))
	return nil
}

// Agents returns the current agent pods (nodes without one are left out), in node order.
func (c *Cluster) Agents() []Agent {
	var out []Agent
	for _, n := range c.nodes {
		if a := n.snap.Load(); a != nil {
			out = append(out, *a)
		}
	}
	return out
}

// Agent returns the agent pod on node, if there is one.
func (c *Cluster) Agent(node string) (Agent, bool) {
	n, err := c.node(node)
	if err != nil {
		return Agent{}, false
	}
	if a := n.snap.Load(); a != nil {
		return *a, true
	}
	return Agent{}, false
}

// DeletePod deletes the agent pod of node the way the API server and a kubelet do: a
// graceful delete (deletionTimestamp set, peers stop probing it), the collector stopped
// (SIGTERM, SIGKILL after the grace period), then the final delete. The node keeps no
// agent until CreatePod.
func (c *Cluster) DeletePod(ctx context.Context, node string) error {
	n, err := c.node(node)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return c.deletePod(ctx, n)
}

// CreatePod creates a new agent pod on node (as the DaemonSet controller would, with a new
// UID and, after the first generation, new pod IPs) and starts its collector.
func (c *Cluster) CreatePod(ctx context.Context, node string) (Agent, error) {
	n, err := c.node(node)
	if err != nil {
		return Agent{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := c.createPod(ctx, n); err != nil {
		return Agent{}, err
	}
	return *n.snap.Load(), nil
}

// RollAgents replaces every agent pod, one node at a time like a DaemonSet rolling update
// with maxUnavailable 1: delete the pod, create its successor (new UID, new IPs), wait
// until it is Ready, go on to the next node.
func (c *Cluster) RollAgents(ctx context.Context) error {
	for _, n := range c.nodes {
		n.mu.Lock()
		err := func() error {
			if n.pod != nil {
				if err := c.deletePod(ctx, n); err != nil {
					return err
				}
			}
			return c.createPod(ctx, n)
		}()
		n.mu.Unlock()
		if err != nil {
			return fmt.Errorf("simcluster: roll %s: %w", n.Name, err)
		}
	}
	c.logf("simcluster: rolled %d agents", len(c.nodes))
	return nil
}

// createPod runs with n.mu held.
func (c *Cluster) createPod(ctx context.Context, n *nodeState) (err error) {
	c.mu.Lock()
	opts := c.agentOpt
	c.mu.Unlock()
	if opts == nil {
		return errors.New("simcluster: StartAgents first")
	}
	if n.pod != nil {
		return fmt.Errorf("simcluster: %s already has agent pod %s", n.Name, n.pod.name)
	}
	gen := n.gen
	v4, v6 := podIPv4(n.Index, gen), podIPv6(n.Index, gen)
	if gen > 0 {
		if err := addPodAddrs(ctx, n.Netns, v4, v6); err != nil {
			return err
		}
		defer func() {
			if err != nil && n.pod == nil {
				_ = delPodAddrs(context.Background(), n.Netns, v4, v6)
			}
		}()
	}
	n.gen++

	ds, err := c.Client.AppsV1().DaemonSets(Namespace).Get(ctx, AgentDaemonSet, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("simcluster: get DaemonSet %s/%s: %w", Namespace, AgentDaemonSet, err)
	}
	pods := c.Client.CoreV1().Pods(Namespace)
	created, err := pods.Create(ctx, podFromTemplate(ds, n.Name), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("simcluster: create agent pod on %s: %w", n.Name, err)
	}
	defer func() {
		if err != nil && n.pod == nil {
			// No collector runs for it: take the pod object back.
			_ = pods.Delete(context.Background(), created.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
		}
	}()

	// Play the kubelet: the sandbox is up with its IPs, the container is starting.
	pod, err := startingStatus(ctx, pods, created.Name, n, v4, v6)
	if err != nil {
		return fmt.Errorf("simcluster: set status of pod %s: %w", created.Name, err)
	}

	env, tokenPath, tokenRefresh, err := c.agentEnv(ctx, pod, opts)
	if err != nil {
		return err
	}
	logPath := filepath.Join(c.Dir, "logs", fmt.Sprintf("agent-%s-%s.log", n.Name, pod.Name))
	proc, err := startProcess("agent "+pod.Name+" on "+n.Name, n.Netns, []string{c.opts.Collector, "--config", opts.Config}, env, logPath)
	if err != nil {
		return err
	}
	readyURL, threshold := readinessProbe(pod)
	ap := &agentPod{name: pod.Name, uid: string(pod.UID), gen: gen, ips: []netip.Addr{v4, v6}, proc: proc, readyURL: readyURL, threshold: threshold,
		pod: pod, tokenPath: tokenPath, tokenRefresh: tokenRefresh}
	n.pod = ap
	n.publish()
	c.mu.Lock()
	c.procs = append(c.procs, proc)
	c.mu.Unlock()
	c.logf("simcluster: %s: pod %s (uid %s, %s, %s) collector pid %d", n.Name, pod.Name, pod.UID, v4, v6, proc.Pid())

	ctx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()
	if err := waitReady(ctx, ap); err != nil {
		return fmt.Errorf("simcluster: agent %s on %s not ready: %w\n%s", pod.Name, n.Name, err, proc.LogTail(30))
	}
	if err := c.setReady(ctx, ap, true); err != nil {
		return err
	}
	ap.ready, ap.tracked = true, true
	n.publish()
	return nil
}

// startingStatus plays the kubelet for the agent pod name on n: Running with the
// sandbox's IPs, its containers started but not Ready yet.
func startingStatus(ctx context.Context, pods corev1client.PodInterface, name string, n *nodeState, v4, v6 netip.Addr) (*corev1.Pod, error) {
	now := metav1.Now()
	var pod *corev1.Pod
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := &cur.Status
		st.Phase = corev1.PodRunning
		st.HostIP = n.IPv4.String()
		st.HostIPs = []corev1.HostIP{{IP: n.IPv4.String()}, {IP: n.IPv6.String()}}
		st.PodIP = v4.String()
		st.PodIPs = []corev1.PodIP{{IP: v4.String()}, {IP: v6.String()}}
		st.StartTime = &now
		st.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, LastTransitionTime: now, Reason: "ContainersNotReady"},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now, Reason: "ContainersNotReady"},
		}
		st.ContainerStatuses = nil
		for _, ct := range cur.Spec.Containers {
			st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
				Name: ct.Name, Image: ct.Image, ImageID: ct.Image, Started: ptr(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			})
		}
		pod, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	return pod, err
}

// endpointFor is the gateway the agent on node sends to.
func (o *AgentOptions) endpointFor(node string) string {
	if n := len(o.GatewayEndpoints); n > 0 {
		return o.GatewayEndpoints[shard.Of(node, n)]
	}
	return o.GatewayEndpoint
}

// agentEnv is the agent collector's environment (the downward API's variables, the gateway
// token, the gateway CA, the harness's settings), with the token's path and refresh time.
func (c *Cluster) agentEnv(ctx context.Context, pod *corev1.Pod, opts *AgentOptions) (env []string, tokenPath string, tokenRefresh time.Time, err error) {
	if env, err = downwardEnv(pod); err != nil {
		return nil, "", time.Time{}, err
	}
	// The projected token the DaemonSet mounts, minted for this pod before its collector
	// starts (the bearer-token extension needs the file at start).
	if src, ok := podTokenSource(pod); ok {
		tokenPath = filepath.Join(c.Dir, "pods", pod.Name, "gateway-token")
		if tokenRefresh, err = c.writePodToken(ctx, pod, src, tokenPath); err != nil {
			return nil, "", time.Time{}, err
		}
		env = append(env, "NETPULSE_GATEWAY_TOKEN_FILE="+tokenPath)
	}
	if c.gatewayTLS != nil {
		env = append(env, "NETPULSE_GATEWAY_CA_FILE="+c.gatewayTLS.CAFile)
	}
	env = append(env,
		"NETPULSE_K8S_AUTH=kubeConfig",
		"KUBECONFIG="+c.AgentKubeconfig,
		"NETPULSE_GATEWAY_ENDPOINT="+opts.endpointFor(pod.Spec.NodeName),
		"NETPULSE_PROBE_INTERVAL="+opts.ProbeInterval.String(),
		"NETPULSE_PROBE_TIMEOUT="+opts.ProbeTimeout.String(),
		"NETPULSE_PEER_GRACE="+opts.PeerGrace.String(),
	)
	env = mergeEnv(append(cleanEnv(), env...), opts.Env)
	return env, tokenPath, tokenRefresh, nil
}

// deletePod runs with n.mu held.
func (c *Cluster) deletePod(ctx context.Context, n *nodeState) error {
	ap := n.pod
	if ap == nil {
		return fmt.Errorf("simcluster: %s has no agent pod", n.Name)
	}
	pods := c.Client.CoreV1().Pods(Namespace)
	uid := types.UID(ap.uid)
	pre := &metav1.Preconditions{UID: &uid}
	// A pod bound to a node is only marked for deletion; the kubelet finishes the job.
	if err := pods.Delete(ctx, ap.name, metav1.DeleteOptions{Preconditions: pre}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("simcluster: delete pod %s: %w", ap.name, err)
	}
	ap.ready = false
	n.publish()
	if err := ap.proc.Stop(10 * time.Second); err != nil {
		return err
	}
	if err := pods.Delete(ctx, ap.name, metav1.DeleteOptions{Preconditions: pre, GracePeriodSeconds: ptr(int64(0))}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("simcluster: final delete of pod %s: %w", ap.name, err)
	}
	for {
		p, err := pods.Get(ctx, ap.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID != uid) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("simcluster: pod %s still exists: %w", ap.name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if ap.gen > 0 {
		if err := delPodAddrs(ctx, n.Netns, ap.ips[0], ap.ips[1]); err != nil {
			return err
		}
	}
	n.pod = nil
	n.publish()
	c.logf("simcluster: %s: pod %s deleted", n.Name, ap.name)
	return nil
}

// setReady writes the Ready and ContainersReady conditions, as the kubelet does after
// readiness probes.
func (c *Cluster) setReady(ctx context.Context, ap *agentPod, ready bool) error {
	pods := c.Client.CoreV1().Pods(Namespace)
	status, reason := corev1.ConditionFalse, "ContainersNotReady"
	if ready {
		status, reason = corev1.ConditionTrue, ""
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, ap.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if string(cur.UID) != ap.uid {
			return fmt.Errorf("simcluster: pod %s was replaced", ap.name)
		}
		now := metav1.Now()
		for i := range cur.Status.Conditions {
			cond := &cur.Status.Conditions[i]
			if cond.Type == corev1.PodReady || cond.Type == corev1.ContainersReady {
				if cond.Status != status {
					cond.LastTransitionTime = now
				}
				cond.Status, cond.Reason = status, reason
			}
		}
		for i := range cur.Status.ContainerStatuses {
			cur.Status.ContainerStatuses[i].Ready = ready
			if ap.proc != nil {
				cur.Status.ContainerStatuses[i].ContainerID = fmt.Sprintf("simcluster://%d", ap.proc.Pid())
			}
		}
		_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

var probeClient = &http.Client{
	Timeout: time.Second,
	Transport: &http.Transport{
		Proxy:             nil, // only ever the harness's own addresses
		DisableKeepAlives: true,
		DialContext:       (&net.Dialer{Timeout: time.Second}).DialContext,
	},
}

// probeOnce is one readiness probe: an HTTP GET that must answer 2xx/3xx.
func probeOnce(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

func waitReady(ctx context.Context, ap *agentPod) error {
	for {
		if ap.proc.Exited() {
			return fmt.Errorf("collector exited: %v", ap.proc.Err())
		}
		if ap.readyURL == "" || probeOnce(ctx, ap.readyURL) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("readiness probe %s: %w", ap.readyURL, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// kubeletLoop keeps the Ready condition of every agent pod in line with its readiness
// probe (period 1s, the probe's failureThreshold) and with the collector being alive.
func (c *Cluster) kubeletLoop() {
	defer close(c.kubeletDone)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-c.kubeletStop:
			return
		case <-tick.C:
		}
		for _, n := range c.nodes {
			c.kubeletSync(n)
		}
	}
}

func (c *Cluster) kubeletSync(n *nodeState) {
	if !n.mu.TryLock() {
		return // a pod operation is under way on this node
	}
	defer n.mu.Unlock()
	ap := n.pod
	if ap == nil || !ap.tracked {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if ap.tokenPath != "" && time.Now().After(ap.tokenRefresh) {
		if src, ok := podTokenSource(ap.pod); ok {
			if next, err := c.writePodToken(ctx, ap.pod, src, ap.tokenPath); err == nil {
				ap.tokenRefresh = next
			} // else: the API server is away; the next tick tries again
		}
	}
	ok := !ap.proc.Exited() && (ap.readyURL == "" || probeOnce(ctx, ap.readyURL))
	if ok {
		ap.failures = 0
	} else {
		ap.failures++
	}
	want := ap.ready
	switch {
	case ok && !ap.ready:
		want = true
	case !ok && ap.ready && (ap.failures >= ap.threshold || ap.proc.Exited()):
		want = false
	}
	if want == ap.ready {
		return
	}
	if err := c.setReady(ctx, ap, want); err != nil {
		return // e.g. the API server is down: try again on the next tick
	}
	ap.ready = want
	n.publish()
	c.logf("simcluster: %s: pod %s Ready=%v", n.Name, ap.name, want)
}

// podFromTemplate builds the pod the DaemonSet controller would create for node.
func podFromTemplate(ds *appsv1.DaemonSet, node string) *corev1.Pod {
	t := ds.Spec.Template
	labels := maps.Clone(t.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels["pod-template-generation"] = strconv.FormatInt(ds.Generation, 10)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: ds.Name + "-",
			Namespace:    ds.Namespace,
			Labels:       labels,
			Annotations:  maps.Clone(t.Annotations),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID,
				Controller: ptr(true), BlockOwnerDeletion: ptr(true),
			}},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = node
	return pod
}

// downwardEnv resolves the first container's env as the kubelet would: literal values and
// the downward API's fieldRefs.
func downwardEnv(pod *corev1.Pod) ([]string, error) {
	if len(pod.Spec.Containers) == 0 {
		return nil, fmt.Errorf("simcluster: pod %s has no containers", pod.Name)
	}
	var env []string
	for _, e := range pod.Spec.Containers[0].Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
			continue
		}
		if e.ValueFrom.FieldRef == nil {
			return nil, fmt.Errorf("simcluster: env %s: only value and fieldRef are simulated", e.Name)
		}
		v, err := fieldPath(pod, e.ValueFrom.FieldRef.FieldPath)
		if err != nil {
			return nil, fmt.Errorf("simcluster: env %s: %w", e.Name, err)
		}
		env = append(env, e.Name+"="+v)
	}
	return env, nil
}

func fieldPath(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	case "status.podIPs":
		ips := make([]string, len(pod.Status.PodIPs))
		for i, p := range pod.Status.PodIPs {
			ips[i] = p.IP
		}
		return strings.Join(ips, ","), nil
	case "status.hostIPs":
		ips := make([]string, len(pod.Status.HostIPs))
		for i, p := range pod.Status.HostIPs {
			ips[i] = p.IP
		}
		return strings.Join(ips, ","), nil
	}
	for _, m := range []struct {
		prefix string
		values map[string]string
	}{{"metadata.labels", pod.Labels}, {"metadata.annotations", pod.Annotations}} {
		if strings.HasPrefix(path, m.prefix+"['") && strings.HasSuffix(path, "']") {
			return m.values[path[len(m.prefix)+2:len(path)-2]], nil
		}
	}
	return "", fmt.Errorf("fieldPath %q is not simulated", path)
}

// readinessProbe turns the first container's HTTP readiness probe into a URL on the pod IP.
func readinessProbe(pod *corev1.Pod) (url string, failureThreshold int) {
	failureThreshold = 3
	ct := pod.Spec.Containers[0]
	p := ct.ReadinessProbe
	if p == nil || p.HTTPGet == nil {
		return "", failureThreshold
	}
	if p.FailureThreshold > 0 {
		failureThreshold = int(p.FailureThreshold)
	}
	port := p.HTTPGet.Port.IntValue()
	if port == 0 {
		for _, cp := range ct.Ports {
			if cp.Name == p.HTTPGet.Port.String() {
				port = int(cp.ContainerPort)
			}
		}
	}
	host := p.HTTPGet.Host
	if host == "" {
		host = pod.Status.PodIP
	}
	scheme := strings.ToLower(string(p.HTTPGet.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := p.HTTPGet.Path
	if path == "" {
		path = "/"
	}
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + path, failureThreshold
}

// mergeEnv overrides or appends KEY=VALUE pairs.
func mergeEnv(env []string, extra map[string]string) []string {
	if len(extra) == 0 {
		return env
	}
	out := make([]string, 0, len(env)+len(extra))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := extra[k]; !ok {
			out = append(out, kv)
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, k+"="+extra[k])
	}
	return out
}

func ptr[T any](v T) *T { return &v }
