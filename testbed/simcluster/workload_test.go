// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package simcluster

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netpulse/netpulse/testbed/disttest"
	"github.com/netpulse/netpulse/testbed/netnstest"
)

func TestWorkloadAddressPlan(t *testing.T) {
	require.Equal(t, "198.18.0.250", workloadIPv4(0).String())
	require.Equal(t, "198.18.0.254", workloadIPv4(MaxWorkloads-1).String())
	require.Equal(t, "fd00:6e70::250", workloadIPv6(0).String())
	taken := map[netip.Addr]bool{HostIPv4: true, HostIPv6: true}
	for i := 1; i <= MaxNodes; i++ {
		for gen := 0; gen <= 5; gen++ {
			taken[podIPv4(i, gen)], taken[podIPv6(i, gen)] = true, true
		}
	}
	for k := range MaxWorkloads {
		for _, a := range []netip.Addr{workloadIPv4(k), workloadIPv6(k)} {
			require.True(t, Prefix4.Contains(a) || Prefix6.Contains(a), "%v outside the plan", a)
			require.False(t, taken[a], "%v used twice", a)
			taken[a] = true
		}
		require.LessOrEqual(t, len(workloadVethName("np", "abcdef", k)), 15)
	}
	nsRE, linkRE := leftoverPatterns("np")
	require.True(t, nsRE.MatchString(workloadNetnsName("np", "abcdef", 3)), "swept")
	require.True(t, linkRE.MatchString(workloadVethName("np", "abcdef", 3)), "swept")
	require.False(t, nsRE.MatchString("np-abcdef-x3"))
}

func TestServiceRuleset(t *testing.T) {
	svc := func(name, ip string, port, target int32) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{
				Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(target),
			}}},
		}
	}
	ep := func(ip string, ready bool) serviceEndpoint {
		return serviceEndpoint{pod: "p", ip: netip.MustParseAddr(ip), ready: ready}
	}
	rs := serviceRuleset([]*simService{
		{svc: svc("web", "10.0.0.23", 80, 8080), endpoints: []serviceEndpoint{ep("198.18.0.251", false), ep("198.18.0.250", true), ep("198.18.0.11", true)}},
		{svc: svc("none", "10.0.0.24", 443, 8443), endpoints: []serviceEndpoint{ep("198.18.0.252", false)}},
		{svc: svc("headless", "None", 80, 80)},
	})
	require.True(t, strings.HasPrefix(rs, "table ip netpulse_svc\ndelete table ip netpulse_svc\n"))
	require.Contains(t, rs, "type nat hook output priority -100;")
	require.Contains(t, rs, `ip daddr 10.0.0.23 tcp dport 80 counter dnat to 198.18.0.250:8080 comment "apps/web"`, "the first ready endpoint")
	require.Contains(t, rs, `ip daddr 10.0.0.24 tcp dport 443 counter reject with tcp reset comment "apps/none"`)
	require.NotContains(t, rs, "headless")
	require.Equal(t, "table ip netpulse_svc\ndelete table ip netpulse_svc\n", serviceRuleset(nil))
}

func TestSidecarArgv(t *testing.T) {
	ct := corev1.Container{
		Name:         "netpulse",
		Command:      []string{"/otelcol-netpulse"},
		Args:         []string{"--config=/conf/sidecar.yaml", "--feature-gates=x"},
		VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/conf"}},
	}
	argv, err := sidecarArgv("/bin/col", ct, nil, "/tmp/s.yaml")
	require.NoError(t, err)
	require.Equal(t, []string{"/bin/col", "--config=/tmp/s.yaml", "--feature-gates=x"}, argv)

	ct.Args = []string{"--config", "/conf/a.yaml", "--config=file:/conf/b.yaml", "--config=yaml:exporters::debug::verbosity: basic"}
	argv, err = sidecarArgv("/bin/col", ct, nil, "/tmp/s.yaml")
	require.NoError(t, err)
	require.Equal(t, []string{"/bin/col", "--config=/tmp/s.yaml", "--config=yaml:exporters::debug::verbosity: basic"}, argv)

	_, err = sidecarArgv("/bin/col", ct, nil, "")
	require.ErrorContains(t, err, "SidecarConfig")

	ct.Args = nil
	argv, err = sidecarArgv("/bin/col", ct, nil, "/tmp/s.yaml")
	require.NoError(t, err)
	require.Equal(t, []string{"/bin/col", "--config=/tmp/s.yaml"}, argv)

	argv, err = sidecarArgv("/bin/col", ct, []string{"--config=/x"}, "/tmp/s.yaml")
	require.NoError(t, err)
	require.Equal(t, []string{"/bin/col", "--config=/x"}, argv, "SidecarArgs as given")
}

// startTestCluster starts a cluster without agents and gateway for t.
func startTestCluster(t *testing.T, opts Options) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a simulated cluster")
	}
	netnstest.RequireRoot(t)
	var mu sync.Mutex
	done := false
	t.Cleanup(func() { mu.Lock(); done = true; mu.Unlock() })
	opts.Logf = func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if done {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
			return
		}
		t.Logf(format, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			c.SetKeepDir(true)
			t.Logf("simulated cluster logs (run dir %s):\n%s", c.Dir, c.Logs(40))
		}
		require.NoError(t, c.Stop())
		entries, _ := os.ReadDir("/run/netns")
		for _, e := range entries {
			require.False(t, strings.HasPrefix(e.Name(), opts.Prefix+"-"+c.RunID), "namespace %s left behind", e.Name())
		}
	})
	return c
}

func workloadPod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps", Labels: labels},
		Spec: corev1.PodSpec{
			ServiceAccountName: "apps-sa",
			Containers:         []corev1.Container{{Name: "app", Image: "example.com/app:1"}},
		},
	}
}

// dialFrom connects from inside netns to addr and closes the connection.
func dialFrom(netns, addr string, timeout time.Duration) error {
	var conn net.Conn
	err := inNetns(netns, func() error {
		var err error
		conn, err = net.DialTimeout("tcp", addr, timeout)
		return err
	})
	if err != nil {
		return err
	}
	return conn.Close()
}

// getFrom does an HTTP GET from inside netns.
func getFrom(netns, url string) (int, string, error) {
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		err := inNetns(netns, func() error {
			var err error
			conn, err = (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, addr)
			return err
		})
		return conn, err
	}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// TestWorkloadAndService: two workloads without sidecar on a 2-node cluster (no agents,
// no gateway); a recording server in one, a ClusterIP Service selecting it; connections
// from the other workload (and from a node) to the pod IPs and the ClusterIP are recorded
// with the client's address; PartitionWorkload cuts them, HealWorkload/HealAll restore;
// StopWorkload removes the namespace and the Service's endpoint; a slot is reused.
func TestWorkloadAndService(t *testing.T) {
	c := startTestCluster(t, Options{Nodes: 2, Prefix: "np"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	web, err := c.StartWorkload(ctx, WorkloadOptions{Pod: workloadPod("web", map[string]string{"app": "web"}), Node: "node-1"})
	require.NoError(t, err)
	client, err := c.StartWorkload(ctx, WorkloadOptions{Pod: workloadPod("client", map[string]string{"app": "client"}), Node: "node-2"})
	require.NoError(t, err)
	require.Equal(t, workloadIPv4(0), web.IPv4)
	require.Equal(t, workloadIPv6(0), web.IPv6)
	require.Equal(t, workloadIPv4(1), client.IPv4)
	require.Nil(t, web.Sidecar())
	require.Len(t, c.Workloads(), 2)
	got, err := c.Workload("apps/client")
	require.NoError(t, err)
	require.Same(t, client, got)

	// The kubelet's part, through the API.
	pod, err := c.Client.CoreV1().Pods("apps").Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, web.UID, pod.UID)
	require.Equal(t, "node-1", pod.Spec.NodeName)
	require.Equal(t, corev1.PodRunning, pod.Status.Phase)
	require.Equal(t, []corev1.PodIP{{IP: "198.18.0.250"}, {IP: "fd00:6e70::250"}}, pod.Status.PodIPs)
	require.Equal(t, "198.18.0.11", pod.Status.HostIP)
	ready := false
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			ready = cond.Status == corev1.ConditionTrue
		}
	}
	require.True(t, ready, "Ready condition")
	_, err = c.Client.CoreV1().ServiceAccounts("apps").Get(ctx, "apps-sa", metav1.GetOptions{})
	require.NoError(t, err, "service account created")

	rec, err := c.Serve(ctx, web, 8080)
	require.NoError(t, err)
	require.Equal(t, 8080, rec.Port)
	svc, err := c.CreateService(ctx, "apps", "web", 80, 8080, map[string]string{"app": "web"})
	require.NoError(t, err)
	clusterIP := netip.MustParseAddr(svc.Spec.ClusterIP)
	require.True(t, ServiceCIDR.Contains(clusterIP), clusterIP)
	svcAddr := net.JoinHostPort(clusterIP.String(), "80")
	ep, ok := c.ServiceEndpoint("apps", "web")
	require.True(t, ok)
	require.Equal(t, netip.AddrPortFrom(web.IPv4, 8080), ep)
	slice, err := c.Client.DiscoveryV1().EndpointSlices("apps").Get(ctx, "web-simcluster", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "web", slice.Labels[discoveryv1.LabelServiceName])
	require.Len(t, slice.Endpoints, 1)
	require.Equal(t, []string{"198.18.0.250"}, slice.Endpoints[0].Addresses)
	require.True(t, *slice.Endpoints[0].Conditions.Ready)

	waitCount := func(r *PeerRecorder, from netip.Addr, n int) {
		t.Helper()
		require.Eventually(t, func() bool { return r.Count(from) >= n }, 5*time.Second, 10*time.Millisecond,
			"%d connections from %s; peers %v", n, from, r.Peers())
	}
	// Pod IP, then ClusterIP: both recorded with the client pod's address (DNAT, no SNAT).
	require.NoError(t, dialFrom(client.Netns, net.JoinHostPort(web.IPv4.String(), "8080"), 2*time.Second))
	waitCount(rec, client.IPv4, 1)
	require.NoError(t, dialFrom(client.Netns, svcAddr, 2*time.Second))
	waitCount(rec, client.IPv4, 2)
	require.Equal(t, []netip.Addr{client.IPv4}, rec.Peers())
	code, body, err := getFrom(client.Netns, "http://"+svcAddr+"/anything")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)
	waitCount(rec, client.IPv4, 3)
	require.NoError(t, dialFrom(client.Netns, net.JoinHostPort(web.IPv6.String(), "8080"), 2*time.Second))
	waitCount(rec, client.IPv6, 1)
	// Node namespaces (the agent pods') reach the ClusterIP too.
	n1, err := c.Node("node-1")
	require.NoError(t, err)
	require.NoError(t, dialFrom(n1.Netns, svcAddr, 2*time.Second))
	waitCount(rec, n1.IPv4, 1)
	require.Equal(t, []netip.Addr{client.IPv4, client.IPv6, n1.IPv4}, rec.Peers())

	// A Service without endpoints refuses.
	_, err = c.CreateService(ctx, "apps", "nobody", 81, 0, map[string]string{"app": "nobody"})
	require.NoError(t, err)
	_, ok = c.ServiceEndpoint("apps", "nobody")
	require.False(t, ok)
	nobody, err := c.Client.CoreV1().Services("apps").Get(ctx, "nobody", metav1.GetOptions{})
	require.NoError(t, err)
	err = dialFrom(client.Netns, net.JoinHostPort(nobody.Spec.ClusterIP, "81"), 2*time.Second)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)

	// Partition the server: connections to it time out, by pod IP and by ClusterIP.
	require.NoError(t, c.PartitionWorkload("web"))
	require.True(t, web.Partitioned())
	// The host side of the bridge still reaches it.
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(web.IPv4.String(), "8080"), 2*time.Second)
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	waitCount(rec, HostIPv4, 1)
	before := rec.Total()
	for _, addr := range []string{net.JoinHostPort(web.IPv4.String(), "8080"), svcAddr, net.JoinHostPort(web.IPv6.String(), "8080")} {
		err := dialFrom(client.Netns, addr, time.Second)
		require.Error(t, err, addr)
		var ne net.Error
		require.True(t, errors.As(err, &ne) && ne.Timeout(), "%s: want a timeout, got %v", addr, err)
	}
	require.Equal(t, before, rec.Total())
	require.NoError(t, c.HealWorkload("apps/web"))
	require.NoError(t, dialFrom(client.Netns, svcAddr, 2*time.Second))
	waitCount(rec, client.IPv4, 4)

	// Partition the client: its own connections fail at its firewall.
	require.NoError(t, c.PartitionWorkload("client"))
	err = dialFrom(client.Netns, svcAddr, time.Second)
	require.Error(t, err)
	t.Logf("partitioned client dialing the Service: %v", err)
	require.NoError(t, c.HealAll())
	require.False(t, client.Partitioned())
	require.NoError(t, dialFrom(client.Netns, svcAddr, 2*time.Second))
	waitCount(rec, client.IPv4, 5)

	// StopWorkload: namespace, pod, recorder and the Service's endpoint go.
	require.NoError(t, c.StopWorkload(ctx, web))
	_, err = os.Stat(filepath.Join("/run/netns", web.Netns))
	require.True(t, os.IsNotExist(err), "namespace %s still there", web.Netns)
	require.True(t, linkGone(web.hostVeth))
	_, err = c.Client.CoreV1().Pods("apps").Get(ctx, "web", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "pod still there: %v", err)
	_, ok = c.ServiceEndpoint("apps", "web")
	require.False(t, ok)
	require.ErrorIs(t, dialFrom(client.Netns, svcAddr, 2*time.Second), syscall.ECONNREFUSED)
	require.Len(t, c.Workloads(), 1)
	_, err = c.Workload("web")
	require.Error(t, err)

	// The slot is reused (same addresses and MAC); the Service follows the new pod.
	web2, err := c.StartWorkload(ctx, WorkloadOptions{Pod: workloadPod("web-2", map[string]string{"app": "web"}), Node: "node-2"})
	require.NoError(t, err)
	require.Equal(t, web.IPv4, web2.IPv4)
	require.Equal(t, web.Netns, web2.Netns)
	rec2, err := c.Serve(ctx, web2, 8080)
	require.NoError(t, err)
	ep, ok = c.ServiceEndpoint("apps", "web")
	require.True(t, ok)
	require.Equal(t, netip.AddrPortFrom(web2.IPv4, 8080), ep)
	require.NoError(t, dialFrom(client.Netns, svcAddr, 2*time.Second))
	waitCount(rec2, client.IPv4, 1)

	// At most MaxWorkloads.
	for i := len(c.Workloads()); i < MaxWorkloads; i++ {
		_, err := c.StartWorkload(ctx, WorkloadOptions{Pod: workloadPod("filler-"+strconv.Itoa(i), nil), Node: "node-1"})
		require.NoError(t, err)
	}
	_, err = c.StartWorkload(ctx, WorkloadOptions{Pod: workloadPod("one-too-many", nil), Node: "node-1"})
	require.ErrorContains(t, err, "at most")
	_, err = c.Client.CoreV1().Pods("apps").Get(ctx, "one-too-many", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err))
}

// TestWorkloadSidecar runs a sidecar collector (health_check, an OTLP receiver and
// bearertokenauth reading the projected token) and checks its namespace, env, token,
// readiness and Ready condition.
func TestWorkloadSidecar(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a simulated cluster")
	}
	netnstest.RequireRoot(t)
	collector := disttest.Collector(t)
	c := startTestCluster(t, Options{Nodes: 2, Prefix: "np", Collector: collector})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	config := filepath.Join(t.TempDir(), "sidecar.yaml")
	require.NoError(t, os.WriteFile(config, []byte(`
extensions:
  health_check:
    endpoint: ${env:POD_IP}:13133
  bearertokenauth:
    filename: ${env:NETPULSE_GATEWAY_TOKEN_FILE}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: ${env:POD_IP}:4317
exporters:
  debug: {}
service:
  extensions: [health_check, bearertokenauth]
  telemetry:
    metrics:
      level: none
  pipelines:
    metrics:
      receivers: [otlp]
      exporters: [debug]
`), 0o644))
	pod := workloadPod("checked", map[string]string{"app": "checked"})
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
		Name:  "netpulse",
		Image: "ghcr.io/netpulse/otelcol-netpulse:0.1.0",
		Args:  []string{"--config=/conf/sidecar.yaml"},
		Env: []corev1.EnvVar{
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(13133)}}},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "conf", MountPath: "/conf"},
			{Name: "gateway-token", MountPath: "/var/run/secrets/netpulse/gateway-token"},
		},
	})
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sidecar"}}}},
		{Name: "gateway-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
			ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "netpulse-gateway", ExpirationSeconds: ptr(int64(3600)), Path: "token"},
		}}}}},
	}
	w, err := c.StartWorkload(ctx, WorkloadOptions{Pod: pod, Node: "node-2", Sidecar: "netpulse", SidecarConfig: config, ExtraEnv: map[string]string{"EXTRA": "1"}})
	require.NoError(t, err)
	p := w.Sidecar()
	require.NotNil(t, p)
	require.False(t, p.Exited())
	require.True(t, w.Ready())

	// In the pod's namespace.
	nsLink, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", p.Pid()))
	require.NoError(t, err)
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(filepath.Join("/run/netns", w.Netns), &st))
	require.Equal(t, fmt.Sprintf("net:[%d]", st.Ino), nsLink)

	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.Pid()))
	require.NoError(t, err)
	env := map[string]string{}
	for _, kv := range strings.Split(string(environ), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	require.Equal(t, "198.18.0.250", env["POD_IP"])
	require.Equal(t, "checked", env["POD_NAME"])
	require.Equal(t, "node-2", env["NODE_NAME"])
	require.Equal(t, "1", env["EXTRA"])
	require.Equal(t, "kubeConfig", env["NETPULSE_K8S_AUTH"])
	require.Equal(t, c.GatewayCAFile(), env[EnvGatewayCAFile])
	require.FileExists(t, env["KUBECONFIG"])

	// The projected token: the pod's service account, the volume's audience, bound to the pod.
	tok, err := os.ReadFile(env[EnvGatewayTokenFile])
	require.NoError(t, err)
	parts := strings.Split(string(tok), ".")
	require.Len(t, parts, 3)
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var claims struct {
		Aud []string `json:"aud"`
		Sub string   `json:"sub"`
		K8s struct {
			Pod struct {
				Name string `json:"name"`
				UID  string `json:"uid"`
			} `json:"pod"`
		} `json:"kubernetes.io"`
	}
	require.NoError(t, json.Unmarshal(raw, &claims))
	require.Equal(t, []string{"netpulse-gateway"}, claims.Aud)
	require.Equal(t, "system:serviceaccount:apps:apps-sa", claims.Sub)
	require.Equal(t, "checked", claims.K8s.Pod.Name)
	require.Equal(t, string(w.UID), claims.K8s.Pod.UID)

	// The readiness probe answered, so the pod is Ready with its container IDs.
	got, err := c.Client.CoreV1().Pods("apps").Get(ctx, "checked", metav1.GetOptions{})
	require.NoError(t, err)
	for _, cs := range got.Status.ContainerStatuses {
		require.True(t, cs.Ready, cs.Name)
	}
	require.Contains(t, c.Logs(5), "sidecar netpulse of apps/checked")

	require.NoError(t, c.StopWorkload(ctx, w))
	require.True(t, p.Exited())
}
