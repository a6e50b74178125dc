// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package simcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"

	"github.com/netpulse/netpulse/testbed/kubetest"
)

// MaxWorkloads bounds the workload pods running at once: workload slot k (0-based) owns
// 198.18.0.(250+k) and fd00:6e70::<250+k>, above every node and agent-pod address.
const MaxWorkloads = 5

// workloadIPv4 is the address of workload slot k: 198.18.0.(250+k).
func workloadIPv4(k int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, 0, byte(250 + k)}) }

// workloadIPv6 is fd00:6e70::<250+k>, written like the nodes' (slot 0: fd00:6e70::250).
func workloadIPv6(k int) netip.Addr {
	return netip.MustParseAddr(fmt.Sprintf("fd00:6e70::%d", 250+k))
}

// workloadMAC is eth0's fixed MAC address in slot k: a slot reused after StopWorkload
// answers with the MAC the other namespaces' neighbour caches still hold.
func workloadMAC(k int) string { return fmt.Sprintf("02:6e:70:77:00:%02x", k) }

func workloadNetnsName(prefix, runID string, k int) string {
	return fmt.Sprintf("%s-%s-w%d", prefix, runID, k)
}

func workloadVethName(prefix, runID string, k int) string {
	return fmt.Sprintf("%s%sw%d", prefix, runID, k)
}

// Environment the harness gives a sidecar collector, besides the container's own env
// (literal values and downward-API fieldRefs) and WorkloadOptions.ExtraEnv (which wins).
const (
	// EnvGatewayTokenFile is the host file holding the projected ServiceAccount token of the
	// first projected serviceAccountToken volume (with an audience) the sidecar container
	// mounts, as agents get it: bound to the pod, refreshed at 80 % of its life.
	EnvGatewayTokenFile = "NETPULSE_GATEWAY_TOKEN_FILE"
	// EnvGatewayCAFile is the gateway serving certificate's CA (GatewayCAFile).
	EnvGatewayCAFile = "NETPULSE_GATEWAY_CA_FILE"
)

// WorkloadOptions describe a workload pod.
type WorkloadOptions struct {
	// Pod is created through the API as given (name or generateName, namespace - default
	// "default" -, labels, annotations, serviceAccountName, containers, volumes...), with
	// spec.nodeName set to Node. Its namespace and service account are created if missing.
	Pod *corev1.Pod
	// Node is the simulated node the pod is bound to ("node-2"): spec.nodeName, hostIP(s).
	// The pod has a network namespace of its own either way, so node faults do not touch it.
	Node string
	// Sidecar names a container of Pod (in spec.containers, or a native sidecar: an init
	// container with restartPolicy Always) that runs as the real collector (Options.Collector)
	// inside the pod's network namespace. "" runs no process: the pod is only an object
	// and a network namespace (serve with Serve).
	Sidecar string
	// SidecarArgs are the collector's arguments. Default: the container's command[1:] and
	// args, with every file given to --config replaced by SidecarConfig (the files a pod
	// would find under its volume mounts, e.g. /conf/..., do not exist on the host); with no
	// --config among them, --config=SidecarConfig is appended.
	SidecarArgs []string
	// SidecarConfig is the host path of the sidecar's collector configuration.
	SidecarConfig string
	// ExtraEnv adds or overrides environment variables of the sidecar.
	ExtraEnv map[string]string
	// ReadyTimeout bounds the wait for the sidecar's HTTP readiness probe, if its container
	// declares one (default 90s).
	ReadyTimeout time.Duration
}

// Workload is a workload pod: a Pod object whose kubelet is the harness, a network
// namespace of its own on the bridge, and optionally a sidecar collector in it.
type Workload struct {
	Name, Namespace, Node string
	UID                   types.UID
	// IPv4 and IPv6 are the pod's addresses (status.podIPs).
	IPv4, IPv6 netip.Addr
	// Netns is the pod's named network namespace (/run/netns/<Netns>).
	Netns string

	c        *Cluster
	slot     int
	hostVeth string
	podDir   string
	netnsUp  bool // guarded by c.wlMu: the namespace exists (services.go applies rules)

	// mu guards what follows.
	mu        sync.Mutex
	pod       *corev1.Pod
	sidecar   *Process
	faults    faultState
	recorders []*PeerRecorder
	tokens    []*boundToken
	readyURL  string
	threshold int
	failures  int
	ready     bool
	stopped   bool // torn down (or being torn down)

	kubeletStop chan struct{}
	kubeletDone chan struct{}
	stopOnce    sync.Once
}

// Sidecar is the sidecar collector process, nil without one.
func (w *Workload) Sidecar() *Process {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sidecar
}

// Pod returns the pod object as last written by the harness.
func (w *Workload) Pod() *corev1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pod == nil {
		return nil
	}
	return w.pod.DeepCopy()
}

// Ready reports the pod's Ready condition as the harness last wrote it.
func (w *Workload) Ready() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ready
}

// boundToken is a token file the harness keeps fresh for a workload, as the kubelet's
// token projection does: bound to the pod, for src's audience ("" = the API server's).
type boundToken struct {
	src     projectedToken
	path    string
	refresh time.Time
}

// Workloads returns the running workloads in slot order.
func (c *Cluster) Workloads() []*Workload {
	c.wlMu.Lock()
	defer c.wlMu.Unlock()
	var out []*Workload
	for _, w := range c.workloads {
		if w != nil && w.UID != "" {
			out = append(out, w)
		}
	}
	return out
}

// Workload finds a running workload by pod name, or by "namespace/name".
func (c *Cluster) Workload(name string) (*Workload, error) {
	ns, pod, qualified := strings.Cut(name, "/")
	if !qualified {
		pod = ns
	}
	var found []*Workload
	for _, w := range c.Workloads() {
		if w.Name == pod && (!qualified || w.Namespace == ns) {
			found = append(found, w)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("simcluster: no workload %q", name)
	case 1:
		return found[0], nil
	}
	return nil, fmt.Errorf("simcluster: workload name %q is ambiguous; use namespace/name", name)
}

// StartWorkload creates a workload pod on opts.Node: its namespace and service account if
// missing, the Pod through the API (admin), a network namespace with a veth into the bridge
// and the next free workload addresses (198.18.0.(250+k), fd00:6e70::<250+k>), the Service
// rules of the cluster (CreateService), and plays its kubelet: Running with its IPs, Ready
// (after the sidecar's readiness probe, if it declares one). With opts.Sidecar it runs the
// collector in the namespace with the container's downward-API env, a projected token and
// the gateway CA (see EnvGatewayTokenFile), and NETPULSE_K8S_AUTH=kubeConfig with KUBECONFIG
// = a kubeconfig of the pod's service account (a token bound to the pod, refreshed).
func (c *Cluster) StartWorkload(ctx context.Context, opts WorkloadOptions) (w *Workload, err error) {
	if opts.Pod == nil {
		return nil, errors.New("simcluster: WorkloadOptions.Pod is required")
	}
	node, err := c.node(opts.Node)
	if err != nil {
		return nil, err
	}
	pod, err := c.workloadPod(opts, node.Name)
	if err != nil {
		return nil, err
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 90 * time.Second
	}

	c.wlMu.Lock()
	slot := slices.Index(c.workloads[:], nil)
	if slot < 0 {
		c.wlMu.Unlock()
		return nil, fmt.Errorf("simcluster: at most %d workloads run at once", MaxWorkloads)
	}
	w = &Workload{
		Namespace: pod.Namespace, Node: node.Name,
		IPv4: workloadIPv4(slot), IPv6: workloadIPv6(slot),
		Netns: workloadNetnsName(c.opts.Prefix, c.RunID, slot),
		c:     c, slot: slot, hostVeth: workloadVethName(c.opts.Prefix, c.RunID, slot),
		threshold: 3,
	}
	c.workloads[slot] = w // reserved; listed once it has a UID
	c.wlMu.Unlock()
	defer func() {
		if err != nil {
			tctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if terr := c.teardownWorkload(tctx, w, true); terr != nil {
				err = errors.Join(err, fmt.Errorf("cleanup: %w", terr))
			}
			w = nil
		}
	}()

	if err := createPodNetns(ctx, w.Netns, c.Bridge, w.hostVeth, workloadMAC(slot), w.IPv4, w.IPv6); err != nil {
		return w, err
	}
	c.wlMu.Lock()
	w.netnsUp = true
	c.wlMu.Unlock()
	if err := c.applyServiceRules(); err != nil {
		return w, err
	}

	if err := kubetest.EnsureNamespace(ctx, c.Client, pod.Namespace); err != nil {
		return w, fmt.Errorf("simcluster: %w", err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Spec.ServiceAccountName}}
	if _, err := c.Client.CoreV1().ServiceAccounts(pod.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return w, fmt.Errorf("simcluster: create service account %s/%s: %w", pod.Namespace, sa.Name, err)
	}
	created, err := c.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return w, fmt.Errorf("simcluster: create workload pod %s/%s: %w", pod.Namespace, pod.Name+pod.GenerateName, err)
	}
	w.mu.Lock()
	w.pod = created
	w.mu.Unlock()
	c.wlMu.Lock()
	w.Name, w.UID = created.Name, created.UID
	c.wlMu.Unlock()
	w.podDir = filepath.Join(c.Dir, "pods", w.Namespace, w.Name)

	if opts.Sidecar == "" {
		if err := c.writeWorkloadStatus(ctx, w, true); err != nil {
			return w, err
		}
	} else if err := c.startSidecar(ctx, w, opts); err != nil {
		return w, err
	}
	// Endpoints may have changed: the new pod can back a Service.
	if err := c.ResyncServices(); err != nil {
		c.logf("simcluster: workload %s/%s: services not resynced yet: %v", w.Namespace, w.Name, err)
	}
	c.logf("simcluster: workload %s/%s (uid %s) on %s: %s, %s in %s", w.Namespace, w.Name, w.UID, w.Node, w.IPv4, w.IPv6, w.Netns)
	return w, nil
}

// workloadPod is the pod of opts to create on node: namespace and service account
// defaulted, the server's fields cleared, the sidecar's container and binary checked.
func (c *Cluster) workloadPod(opts WorkloadOptions, node string) (*corev1.Pod, error) {
	pod := opts.Pod.DeepCopy()
	if pod.Name == "" && pod.GenerateName == "" {
		return nil, errors.New("simcluster: the workload pod needs a name or generateName")
	}
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = "default"
	}
	pod.Spec.NodeName = node
	pod.ResourceVersion, pod.UID, pod.Status = "", "", corev1.PodStatus{}
	if opts.Sidecar != "" {
		if _, ok := findContainer(pod, opts.Sidecar); !ok {
			return nil, fmt.Errorf("simcluster: pod %s has no container %q for the sidecar", pod.Name, opts.Sidecar)
		}
		if c.opts.Collector == "" {
			return nil, errors.New("simcluster: Options.Collector (the otelcol-netpulse binary) is required to run a sidecar")
		}
	}
	return pod, nil
}

// findContainer looks name up among the pod's containers, then its init containers.
func findContainer(pod *corev1.Pod, name string) (corev1.Container, bool) {
	for _, x := range pod.Spec.Containers {
		if x.Name == name {
			return x, true
		}
	}
	for _, x := range pod.Spec.InitContainers {
		if x.Name == name {
			return x, true
		}
	}
	return corev1.Container{}, false
}

// withContainer is a shallow copy of pod whose only container is ct, for the helpers
// that read the first container (downwardEnv, readinessProbe).
func withContainer(pod *corev1.Pod, ct corev1.Container) *corev1.Pod {
	p := *pod
	p.Spec.Containers = []corev1.Container{ct}
	return &p
}

// startSidecar mints the pod's credentials and runs its sidecar collector.
func (c *Cluster) startSidecar(ctx context.Context, w *Workload, opts WorkloadOptions) error {
	// The kubelet sets the pod Running with its IPs before it starts the containers, and
	// the downward API reads them from there.
	if err := c.writeWorkloadStatus(ctx, w, false); err != nil {
		return err
	}
	w.mu.Lock()
	pod := w.pod
	w.mu.Unlock()
	ct, _ := findContainer(pod, opts.Sidecar)
	argv, err := sidecarArgv(c.opts.Collector, ct, opts.SidecarArgs, opts.SidecarConfig)
	if err != nil {
		return fmt.Errorf("simcluster: sidecar of %s/%s: %w", w.Namespace, w.Name, err)
	}
	one := withContainer(pod, ct)
	env, err := downwardEnv(one)
	if err != nil {
		return err
	}

	// Credentials: the projected token volumes the container mounts (the first one with an
	// audience is the gateway token, as for agents), and an API token for KUBECONFIG.
	tokens, gatewayToken := podTokens(pod, ct, w.podDir)
	apiToken := &boundToken{src: projectedToken{seconds: 3600}, path: filepath.Join(w.podDir, "api-token")}
	tokens = append(tokens, apiToken)
	for _, bt := range tokens {
		if err := c.refreshToken(ctx, pod, bt); err != nil {
			return err
		}
	}
	kubeconfig := filepath.Join(w.podDir, "kubeconfig")
	if err := writeTokenFileKubeconfig(c.AdminConfig.Host, c.AdminConfig.CAData, apiToken.path, kubeconfig); err != nil {
		return err
	}
	if gatewayToken != "" {
		env = append(env, EnvGatewayTokenFile+"="+gatewayToken)
	}
	if c.gatewayTLS != nil {
		env = append(env, EnvGatewayCAFile+"="+c.gatewayTLS.CAFile)
	}
	env = append(env, "NETPULSE_K8S_AUTH=kubeConfig", "KUBECONFIG="+kubeconfig)
	env = mergeEnv(append(cleanEnv(), env...), opts.ExtraEnv)

	logPath := filepath.Join(c.Dir, "logs", fmt.Sprintf("sidecar-%s-%s.log", w.Namespace, w.Name))
	proc, err := startProcess(fmt.Sprintf("sidecar %s of %s/%s", ct.Name, w.Namespace, w.Name), w.Netns, argv, env, logPath)
	if err != nil {
		return err
	}
	readyURL, threshold := readinessProbe(one)
	w.mu.Lock()
	w.sidecar, w.tokens, w.readyURL, w.threshold = proc, tokens, readyURL, threshold
	w.mu.Unlock()
	c.mu.Lock()
	c.procs = append(c.procs, proc)
	c.mu.Unlock()
	c.logf("simcluster: workload %s/%s: sidecar %s pid %d (%s)", w.Namespace, w.Name, ct.Name, proc.Pid(), strings.Join(argv[1:], " "))

	rctx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()
	for readyURL != "" && !probeOnce(rctx, readyURL) {
		if proc.Exited() {
			return fmt.Errorf("simcluster: sidecar of %s/%s exited: %v\n%s", w.Namespace, w.Name, proc.Err(), proc.LogTail(30))
		}
		select {
		case <-rctx.Done():
			return fmt.Errorf("simcluster: sidecar of %s/%s not ready at %s: %w\n%s", w.Namespace, w.Name, readyURL, rctx.Err(), proc.LogTail(30))
		case <-time.After(200 * time.Millisecond):
		}
	}
	if proc.Exited() {
		return fmt.Errorf("simcluster: sidecar of %s/%s exited: %v\n%s", w.Namespace, w.Name, proc.Err(), proc.LogTail(30))
	}
	if err := c.writeWorkloadStatus(ctx, w, true); err != nil {
		return err
	}
	w.kubeletStop, w.kubeletDone = make(chan struct{}), make(chan struct{})
	go c.workloadKubelet(w)
	return nil
}

// podTokens are the projected token volumes ct mounts, each a token to mint into the
// pod's directory; the first with an audience is the gateway token, as for agents.
func podTokens(pod *corev1.Pod, ct corev1.Container, podDir string) (tokens []*boundToken, gatewayToken string) {
	for _, m := range ct.VolumeMounts {
		for _, v := range pod.Spec.Volumes {
			if v.Name != m.Name || v.Projected == nil {
				continue
			}
			for _, s := range v.Projected.Sources {
				t := s.ServiceAccountToken
				if t == nil || t.Audience == "" {
					continue
				}
				src := projectedToken{audience: t.Audience, seconds: 3600}
				if t.ExpirationSeconds != nil {
					src.seconds = *t.ExpirationSeconds
				}
				bt := &boundToken{src: src, path: filepath.Join(podDir, "volumes", v.Name, t.Path)}
				tokens = append(tokens, bt)
				if gatewayToken == "" {
					gatewayToken = bt.path
				}
			}
		}
	}
	return tokens, gatewayToken
}

// sidecarArgv builds the sidecar's command line (see WorkloadOptions.SidecarArgs).
func sidecarArgv(collector string, ct corev1.Container, args []string, config string) ([]string, error) {
	argv := []string{collector}
	if args != nil {
		return append(argv, args...), nil
	}
	var in []string
	if len(ct.Command) > 1 {
		in = append(in, ct.Command[1:]...)
	}
	in = append(in, ct.Args...)
	// isFile: a --config value naming a file (not an inline yaml:, env:, http: URI).
	isFile := func(v string) bool {
		if strings.HasPrefix(v, "file:") {
			return true
		}
		scheme, _, ok := strings.Cut(v, ":")
		return !ok || strings.ContainsAny(scheme, "/.")
	}
	replaced := false
	value := func(v string) (string, bool, error) {
		if !isFile(v) {
			return v, true, nil
		}
		if config == "" {
			return "", false, fmt.Errorf("container %s reads its configuration from %s, a file of the pod: set SidecarConfig or SidecarArgs", ct.Name, v)
		}
		if replaced {
			return "", false, nil // the same file once is enough
		}
		replaced = true
		return config, true, nil
	}
	for i := 0; i < len(in); i++ {
		a := in[i]
		name, v, hasValue := strings.Cut(a, "=")
		if name != "--config" && name != "-config" {
			argv = append(argv, a)
			continue
		}
		if !hasValue {
			if i+1 >= len(in) {
				return nil, fmt.Errorf("container %s: %s without a value", ct.Name, a)
			}
			i++
			v = in[i]
		}
		nv, keep, err := value(v)
		if err != nil {
			return nil, err
		}
		if keep {
			argv = append(argv, name+"="+nv)
		}
	}
	if !replaced && config != "" {
		argv = append(argv, "--config="+config)
	}
	return argv, nil
}

// refreshToken mints bt's token for pod and writes it, as the kubelet's token projection
// does; bt.refresh is when to do it again.
func (c *Cluster) refreshToken(ctx context.Context, pod *corev1.Pod, bt *boundToken) error {
	if bt.src.audience != "" {
		next, err := c.writePodToken(ctx, pod, bt.src, bt.path)
		if err != nil {
			return err
		}
		bt.refresh = next
		return nil
	}
	// The API server's own audience: no audiences in the request.
	seconds := bt.src.seconds
	tr, err := c.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{
			ExpirationSeconds: &seconds,
			BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("simcluster: API token for pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if err := writeFileAtomic(bt.path, []byte(tr.Status.Token), 0o600); err != nil {
		return err
	}
	bt.refresh = time.Now().Add(time.Until(tr.Status.ExpirationTimestamp.Time) * 8 / 10)
	return nil
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// writeTokenFileKubeconfig writes a kubeconfig whose credential is a token file (which
// client-go re-reads, so refreshing the file rotates the credential).
func writeTokenFileKubeconfig(server string, caData []byte, tokenFile, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["simcluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caData}
	kc.AuthInfos["pod"] = &clientcmdapi.AuthInfo{TokenFile: tokenFile}
	kc.Contexts["simcluster"] = &clientcmdapi.Context{Cluster: "simcluster", AuthInfo: "pod"}
	kc.CurrentContext = "simcluster"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*kc, path)
}

// writeWorkloadStatus plays the kubelet's status updates: the first one sets the pod
// Running with its IPs and its containers running; each sets Ready and ContainersReady.
func (c *Cluster) writeWorkloadStatus(ctx context.Context, w *Workload, ready bool) error {
	w.mu.Lock()
	var pid int
	if w.sidecar != nil {
		pid = w.sidecar.Pid()
	}
	w.mu.Unlock()
	n, err := c.node(w.Node)
	if err != nil {
		return err
	}
	pods := c.Client.CoreV1().Pods(w.Namespace)
	status, reason := corev1.ConditionFalse, "ContainersNotReady"
	if ready {
		status, reason = corev1.ConditionTrue, ""
	}
	var updated *corev1.Pod
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != w.UID {
			return fmt.Errorf("simcluster: pod %s/%s was replaced", w.Namespace, w.Name)
		}
		now := metav1.Now()
		st := &cur.Status
		if st.Phase != corev1.PodRunning {
			st.Phase = corev1.PodRunning
			st.HostIP = n.IPv4.String()
			st.HostIPs = []corev1.HostIP{{IP: n.IPv4.String()}, {IP: n.IPv6.String()}}
			st.PodIP = w.IPv4.String()
			st.PodIPs = []corev1.PodIP{{IP: w.IPv4.String()}, {IP: w.IPv6.String()}}
			st.StartTime = &now
			st.Conditions = []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now, Reason: reason},
				{Type: corev1.PodReady, Status: status, LastTransitionTime: now, Reason: reason},
			}
			st.ContainerStatuses, st.InitContainerStatuses = nil, nil
			running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
			for _, ct := range cur.Spec.InitContainers {
				cs := corev1.ContainerStatus{Name: ct.Name, Image: ct.Image, ImageID: ct.Image, Started: ptr(true), State: running}
				if ct.RestartPolicy == nil || *ct.RestartPolicy != corev1.ContainerRestartPolicyAlways {
					cs.Started = ptr(false)
					cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}}
				}
				st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
			}
			for _, ct := range cur.Spec.Containers {
				st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
					Name: ct.Name, Image: ct.Image, ImageID: ct.Image, Started: ptr(true), State: running,
				})
			}
		}
		for i := range st.Conditions {
			cond := &st.Conditions[i]
			if cond.Type == corev1.PodReady || cond.Type == corev1.ContainersReady {
				if cond.Status != status {
					cond.LastTransitionTime = now
				}
				cond.Status, cond.Reason = status, reason
			}
		}
		for _, list := range [][]corev1.ContainerStatus{st.ContainerStatuses, st.InitContainerStatuses} {
			for i := range list {
				if list[i].State.Running == nil {
					continue
				}
				list[i].Ready = ready
				if pid != 0 {
					list[i].ContainerID = fmt.Sprintf("simcluster://%d", pid)
				}
			}
		}
		updated, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("simcluster: set status of pod %s/%s: %w", w.Namespace, w.Name, err)
	}
	w.mu.Lock()
	w.pod, w.ready = updated, ready
	w.mu.Unlock()
	return nil
}

// workloadKubelet keeps a sidecar workload's tokens fresh and its Ready condition in line
// with the sidecar's readiness probe and liveness, every second (like kubeletLoop).
func (c *Cluster) workloadKubelet(w *Workload) {
	defer close(w.kubeletDone)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-w.kubeletStop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		w.mu.Lock()
		pod, tokens, proc, url := w.pod, w.tokens, w.sidecar, w.readyURL
		w.mu.Unlock()
		for _, bt := range tokens {
			if time.Now().After(bt.refresh) {
				_ = c.refreshToken(ctx, pod, bt) // the API server may be away: next tick
			}
		}
		ok := !proc.Exited() && (url == "" || probeOnce(ctx, url))
		w.mu.Lock()
		if ok {
			w.failures = 0
		} else {
			w.failures++
		}
		want := w.ready
		switch {
		case ok && !w.ready:
			want = true
		case !ok && w.ready && (w.failures >= w.threshold || proc.Exited()):
			want = false
		}
		changed := want != w.ready
		w.mu.Unlock()
		if changed {
			if err := c.writeWorkloadStatus(ctx, w, want); err == nil {
				c.logf("simcluster: workload %s/%s Ready=%v", w.Namespace, w.Name, want)
			}
		}
		cancel()
	}
}

// StopWorkload deletes the workload as the API server and a kubelet would (graceful
// delete, the sidecar stopped with SIGTERM and SIGKILL after 10 s, final delete), closes
// its recording servers and removes its network namespace; its slot and addresses are
// free again.
func (c *Cluster) StopWorkload(ctx context.Context, w *Workload) error {
	if w == nil {
		return errors.New("simcluster: nil workload")
	}
	err := c.teardownWorkload(ctx, w, true)
	if rerr := c.ResyncServices(); rerr != nil {
		c.logf("simcluster: after stopping workload %s/%s: services not resynced yet: %v", w.Namespace, w.Name, rerr)
	}
	if err == nil {
		c.logf("simcluster: workload %s/%s stopped", w.Namespace, w.Name)
	}
	return err
}

// teardownWorkload undoes StartWorkload, also a partial one. With api it deletes the pod
// object (Stop skips that: the control plane goes anyway).
func (c *Cluster) teardownWorkload(ctx context.Context, w *Workload, api bool) error {
	var err error
	w.stopOnce.Do(func() { err = c.teardownWorkloadOnce(ctx, w, api) })
	return err
}

func (c *Cluster) teardownWorkloadOnce(ctx context.Context, w *Workload, api bool) error {
	var errs []error
	if w.kubeletStop != nil {
		close(w.kubeletStop)
		<-w.kubeletDone
	}
	w.mu.Lock()
	proc, created := w.sidecar, w.pod != nil
	recs := w.recorders
	w.recorders, w.ready, w.stopped = nil, false, true
	w.mu.Unlock()
	var pre *metav1.Preconditions
	if api && created {
		uid := w.UID
		pre = &metav1.Preconditions{UID: &uid}
		// A pod bound to a node is only marked for deletion; the kubelet finishes the job.
		if err := c.Client.CoreV1().Pods(w.Namespace).Delete(ctx, w.Name, metav1.DeleteOptions{Preconditions: pre}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("simcluster: delete pod %s/%s: %w", w.Namespace, w.Name, err))
		}
	}
	if proc != nil {
		grace := 10 * time.Second
		if !api {
			grace = 5 * time.Second
		}
		errs = append(errs, proc.Stop(grace))
	}
	for _, r := range recs {
		errs = append(errs, r.Close())
	}
	if api && created {
		errs = append(errs, c.finalDeleteWorkloadPod(ctx, w, pre))
	}
	// No Service rule is applied to the namespace from here on.
	c.wlMu.Lock()
	w.netnsUp = false
	c.wlMu.Unlock()
	c.forgetServiceNetns(w.Netns)
	if _, err := os.Stat(filepath.Join("/run/netns", w.Netns)); err == nil {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		errs = append(errs, deleteNetns(dctx, w.Netns))
		cancel()
	}
	if !linkGone(w.hostVeth) {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := ip(dctx, "link", "delete", w.hostVeth); err != nil && !linkGone(w.hostVeth) {
			errs = append(errs, err)
		}
		cancel()
	}
	c.wlMu.Lock()
	if c.workloads[w.slot] == w {
		c.workloads[w.slot] = nil
	}
	c.wlMu.Unlock()
	return errors.Join(errs...)
}

// finalDeleteWorkloadPod removes the pod object for good and waits until it is gone.
func (c *Cluster) finalDeleteWorkloadPod(ctx context.Context, w *Workload, pre *metav1.Preconditions) error {
	pods := c.Client.CoreV1().Pods(w.Namespace)
	if err := pods.Delete(ctx, w.Name, metav1.DeleteOptions{Preconditions: pre, GracePeriodSeconds: ptr(int64(0))}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("simcluster: final delete of pod %s/%s: %w", w.Namespace, w.Name, err)
	}
	for {
		p, err := pods.Get(ctx, w.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID != w.UID) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("simcluster: pod %s/%s still exists: %w", w.Namespace, w.Name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// PeerRecorder is a TCP server in a workload's network namespace that answers HTTP/1.1
// (200 "ok" for any request) and records the remote address of every connection it
// accepts, including connections that send nothing (TCP connect probes).
type PeerRecorder struct {
	// Port is the port it listens on (every address of the pod).
	Port int

	srv       *http.Server
	done      chan struct{}
	mu        sync.Mutex
	order     []netip.Addr
	counts    map[netip.Addr]int
	closeOnce sync.Once
	closeErr  error
}

// Serve opens a recording server on port (0: any free port, see PeerRecorder.Port) on the
// unspecified address inside w's network namespace: the listening socket is created in
// the namespace from a harness goroutine, so the pod's addresses (and its ClusterIP
// Services' DNAT) lead to it. It is closed by Close, StopWorkload or Stop.
func (c *Cluster) Serve(ctx context.Context, w *Workload, port int) (*PeerRecorder, error) {
	if w == nil {
		return nil, errors.New("simcluster: nil workload")
	}
	var ln net.Listener
	err := inNetns(w.Netns, func() error {
		var err error
		ln, err = (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort("", strconv.Itoa(port)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("simcluster: listen on :%d in %s: %w", port, w.Netns, err)
	}
	r := &PeerRecorder{Port: ln.Addr().(*net.TCPAddr).Port, done: make(chan struct{}), counts: map[netip.Addr]int{}}
	r.srv = &http.Server{
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
			rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = io.WriteString(rw, "ok\n")
		}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		_ = ln.Close()
		return nil, fmt.Errorf("simcluster: workload %s/%s is stopped", w.Namespace, w.Name)
	}
	w.recorders = append(w.recorders, r)
	w.mu.Unlock()
	go func() {
		defer close(r.done)
		_ = r.srv.Serve(&recordingListener{Listener: ln, r: r})
	}()
	c.logf("simcluster: workload %s/%s serves HTTP on :%d (recording peers)", w.Namespace, w.Name, r.Port)
	return r, nil
}

type recordingListener struct {
	net.Listener
	r *PeerRecorder
}

func (l *recordingListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return conn, err
	}
	if a, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		l.r.record(a.AddrPort().Addr().Unmap())
	}
	return conn, nil
}

func (r *PeerRecorder) record(a netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts[a] == 0 {
		r.order = append(r.order, a)
	}
	r.counts[a]++
}

// Peers returns the distinct remote addresses seen, in order of first sight (IPv4 ones
// unmapped).
func (r *PeerRecorder) Peers() []netip.Addr {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.order)
}

// Count is how many connections came from addr.
func (r *PeerRecorder) Count(addr netip.Addr) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[addr.Unmap()]
}

// Total is how many connections were accepted.
func (r *PeerRecorder) Total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.counts {
		n += c
	}
	return n
}

// Close stops the server (the listener and its open connections). Idempotent.
func (r *PeerRecorder) Close() error {
	r.closeOnce.Do(func() {
		if err := r.srv.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			r.closeErr = err
		}
		<-r.done
	})
	return r.closeErr
}
