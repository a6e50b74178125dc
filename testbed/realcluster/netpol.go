// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package realcluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/netpulse/netpulse/testbed/kubetest"
)

// NetworkPolicyEngine names the NetworkPolicy engine of Options.NetworkPolicy: SIG
// Network's kube-network-policies (tools/netpol), its process on each node and its log
// (<node dir>/kube-network-policies.log).
const NetworkPolicyEngine = "kube-network-policies"

// NetworkPolicyTable is the nftables table (inet family) the engine keeps in each node's
// namespace: it sends the first packet of every connection to or from a local pod that a
// NetworkPolicy selects to the engine's NFQUEUE, in the postrouting hook (after kube-proxy's
// DNAT, so a Service's traffic is judged on its real destination; bridged traffic between
// two pods of one node passes it too, through br_netfilter, which the nodes turn on).
const NetworkPolicyTable = "kube-network-policies"

// networkPolicyUser is the engine's identity; networkPolicyMetrics its /metrics inside the
// node's namespace (tools/netpol's default).
const (
	networkPolicyUser    = "system:kube-network-policies"
	networkPolicyMetrics = "127.0.0.1:9080"
)

// networkPolicyIdentity gives the engine what upstream's install.yaml gives its service
// account (list and watch pods, namespaces and networkpolicies), plus nodes (for
// AdminNetworkPolicy, off here) and Events (its recorder), bound to a client certificate
// of its own, and writes its kubeconfig.
func (c *Cluster) networkPolicyIdentity(ctx context.Context) (string, error) {
	cs, err := c.Clientset()
	if err != nil {
		return "", err
	}
	meta := metav1.ObjectMeta{Name: NetworkPolicyEngine, Labels: map[string]string{"app.kubernetes.io/part-of": "netpulse-realcluster"}}
	role := &rbacv1.ClusterRole{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "namespaces", "nodes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: meta,
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: NetworkPolicyEngine},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: networkPolicyUser}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("realcluster: %s ClusterRole: %w", NetworkPolicyEngine, err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("realcluster: %s ClusterRoleBinding: %w", NetworkPolicyEngine, err)
	}
	certPEM, keyPEM, err := c.ControlPlane.IssueClientCert(networkPolicyUser)
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.Dir, NetworkPolicyEngine+".kubeconfig")
	if err := kubetest.WriteKubeconfig(&rest.Config{Host: c.ControlPlane.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: c.ControlPlane.CACertPEM(), CertData: certPEM, KeyData: keyPEM}}, path); err != nil {
		return "", err
	}
	return path, nil
}

// startNetworkPolicy starts the engine in the node's network namespace, as kube-proxy.
// --v=2 logs each judged packet (pods, verdict): the first packets of new connections to
// and from the node's policy-selected pods only.
func (c *Cluster) startNetworkPolicy(n *Node, kubeconfig string) error {
	return c.startNodeProcess(n, NetworkPolicyEngine, c.Bins.KubeNetworkPolicies,
		"--kubeconfig="+kubeconfig, "--hostname-override="+n.Name, "--metrics-bind-address="+networkPolicyMetrics, "--v=2")
}

// waitNetworkPolicy waits until every node's engine has synced its caches and installed
// its nftables table.
func (c *Cluster) waitNetworkPolicy(ctx context.Context) error {
	for _, n := range c.Nodes {
		err := waitFor(ctx, time.Minute, func() (bool, error) {
			if err := n.exited(); err != nil {
				return false, err
			}
			cmd := exec.CommandContext(ctx, "ip", "netns", "exec", n.Netns, c.Bins.Nft, "list", "table", "inet", NetworkPolicyTable)
			return cmd.Run() == nil, nil
		}, func() string {
			return NetworkPolicyEngine + " on " + n.Name + " installed no nftables table " + NetworkPolicyTable + "\n" + n.Logs(30)
		})
		if err != nil {
			return err
		}
	}
	c.logf("realcluster: %s running on %d nodes", NetworkPolicyEngine, len(c.Nodes))
	return nil
}

// NetworkPolicyVerdicts reads the node's engine's verdict counters
// (kube_network_policies_packet_count, summed over protocol and family): how many first
// packets of connections it accepted and dropped since it started.
func (n *Node) NetworkPolicyVerdicts() (accepted, dropped float64, err error) {
	if n.process(NetworkPolicyEngine) == nil {
		return 0, 0, fmt.Errorf("realcluster: no %s on %s (Options.NetworkPolicy)", NetworkPolicyEngine, n.Name)
	}
	body, err := HTTPGetInNetns("/run/netns/"+n.Netns, networkPolicyMetrics, "/metrics", 5*time.Second)
	if err != nil {
		return 0, 0, fmt.Errorf("realcluster: %s metrics on %s: %w", NetworkPolicyEngine, n.Name, err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "kube_network_policies_packet_count{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return 0, 0, fmt.Errorf("realcluster: %s metrics: %q", NetworkPolicyEngine, line)
		}
		switch {
		case strings.Contains(line, `verdict="accept"`):
			accepted += v
		case strings.Contains(line, `verdict="drop"`):
			dropped += v
		}
	}
	return accepted, dropped, nil
}

// HTTPGetInNetns GETs http://address+path from inside the network namespace at path
// netns (DialInNetns) and returns the body of a 200 answer.
func HTTPGetInNetns(netns, address, path string, timeout time.Duration) ([]byte, error) {
	conn, err := DialInNetns(netns, "tcp", address, timeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.0\r\nHost: "+address+"\r\nAccept: text/plain\r\n\r\n"); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET http://%s%s: %s", address, path, resp.Status)
	}
	return body, nil
}

// PodNetns is the path of a running pod's network namespace (/proc/<pid>/ns/net of one of
// its containers' processes, as the node's containerd reports it), for DialInNetns.
func (c *Cluster) PodNetns(ctx context.Context, pod *corev1.Pod) (string, error) {
	if pod.Spec.HostNetwork {
		return "", fmt.Errorf("realcluster: pod %s/%s uses the node's network", pod.Namespace, pod.Name)
	}
	n, err := c.Node(pod.Spec.NodeName)
	if err != nil {
		return "", err
	}
	var ids []string
	for _, st := range pod.Status.ContainerStatuses {
		if st.State.Running != nil {
			if _, id, ok := strings.Cut(st.ContainerID, "://"); ok {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		return "", fmt.Errorf("realcluster: pod %s/%s has no running container", pod.Namespace, pod.Name)
	}
	cmd := exec.CommandContext(ctx, c.Bins.Ctr, "--address", n.ContainerdSocket(), "-n", "k8s.io", "tasks", "ls")
	cmd.Env = cleanEnv(c.Bins)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("realcluster: ctr tasks ls on %s: %w: %s", n.Name, err, bytes.TrimSpace(out))
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[2] != "RUNNING" {
			continue
		}
		for _, id := range ids {
			if f[0] == id {
				p := "/proc/" + f[1] + "/ns/net"
				if _, err := os.Stat(p); err != nil {
					return "", fmt.Errorf("realcluster: pod %s/%s: %w", pod.Namespace, pod.Name, err)
				}
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("realcluster: no running task of pod %s/%s on %s:\n%s", pod.Namespace, pod.Name, n.Name, out)
}

// DialInNetns dials address from inside the network namespace at path (a pod's, from
// PodNetns, or a node's, /run/netns/<Netns>): the socket is created on a thread moved into
// that namespace, so the connection is the namespace's own, as if a process there had made
// it. The calling goroutine's namespace is unchanged.
func DialInNetns(path, network, address string, timeout time.Duration) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		conn, err := dialLocked(path, network, address, timeout)
		ch <- result{conn, err}
	}()
	r := <-ch
	return r.conn, r.err
}
