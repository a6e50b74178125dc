// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package simcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/netpulse/netpulse/testbed/kubetest"
)

// FieldManager is the server-side-apply field manager of everything the harness applies.
const FieldManager = "netpulse-simcluster"

// kustomization is the part of a kustomization.yaml the harness understands.
type kustomization struct {
	Resources          []string `json:"resources"`
	ConfigMapGenerator []struct {
		Name      string   `json:"name"`
		Namespace string   `json:"namespace"`
		Files     []string `json:"files"`
	} `json:"configMapGenerator"`
}

func readKustomization(dir string) (*kustomization, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k kustomization
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	return &k, nil
}

// kustomizeFiles lists the manifest files of dir's kustomization, following directory
// resources, in order: what `kubectl apply -k` would apply (minus generators).
func kustomizeFiles(dir string) ([]string, error) {
	k, err := readKustomization(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, r := range k.Resources {
		p := filepath.Join(dir, r)
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("%s/kustomization.yaml: resource %s: %w", dir, r, err)
		}
		if st.IsDir() {
			sub, err := kustomizeFiles(p)
			if err != nil {
				return nil, err
			}
			files = append(files, sub...)
			continue
		}
		files = append(files, p)
	}
	return files, nil
}

// applyDeploy applies what the agents need from deploy/: the CRDs, the namespace, the RBAC
// (the kustomizations' resource lists of deploy/crds and deploy/rbac, i.e. what
// `kubectl apply -k deploy/agent-gateway` applies; the opt-in readiness-gate RBAC is not in
// them), the agent DaemonSet (no DaemonSet controller runs: it is the template and the
// owner of the simulated pods) and the collector ConfigMaps of the configMapGenerator (with
// their plain names, which the workloads reference). The gateway Deployment is not applied:
// the gateway is a host process (StartGateway).
func (c *Cluster) applyDeploy(ctx context.Context) error {
	deploy := filepath.Join(c.opts.RepoRoot, "deploy")
	crds, err := kustomizeFiles(filepath.Join(deploy, "crds"))
	if err != nil {
		return err
	}
	rbac, err := kustomizeFiles(filepath.Join(deploy, "rbac"))
	if err != nil {
		return err
	}
	files := append(append(append(crds, filepath.Join(deploy, "agent-gateway", "namespace.yaml")), rbac...),
		filepath.Join(deploy, "agent-gateway", "agent-daemonset.yaml"))
	if err := c.ApplyFiles(ctx, files...); err != nil {
		return err
	}
	if err := c.configMapsFromGenerator(ctx, filepath.Join(deploy, "agent-gateway")); err != nil {
		return err
	}
	c.logf("simcluster: applied %d manifests from %s", len(files), deploy)
	return nil
}

// ApplyFiles server-side-applies every object of the given multi-document YAML files, in
// order, as admin, and waits for CRDs among them to be Established.
func (c *Cluster) ApplyFiles(ctx context.Context, files ...string) error {
	if err := kubetest.Apply(ctx, c.AdminConfig, files...); err != nil {
		return fmt.Errorf("simcluster: %w", err)
	}
	return nil
}

func (c *Cluster) configMapsFromGenerator(ctx context.Context, dir string) error {
	k, err := readKustomization(dir)
	if err != nil {
		return err
	}
	for _, g := range k.ConfigMapGenerator {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: g.Name, Namespace: g.Namespace}, Data: map[string]string{}}
		if cm.Namespace == "" {
			cm.Namespace = Namespace
		}
		for _, f := range g.Files {
			key, file, ok := strings.Cut(f, "=")
			if !ok {
				key, file = filepath.Base(f), f
			}
			data, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil {
				return err
			}
			cm.Data[key] = string(data)
		}
		_, err := c.Client.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			_, err = c.Client.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("simcluster: config map %s/%s: %w", cm.Namespace, cm.Name, err)
		}
	}
	return nil
}

// createNodes creates the Node objects with zone labels, InternalIPs and a Ready condition.
// No node-lifecycle controller runs, so nothing taints or evicts them.
func (c *Cluster) createNodes(ctx context.Context) error {
	nodes := c.Client.CoreV1().Nodes()
	for _, n := range c.nodes {
		obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: n.Name,
			Labels: map[string]string{
				"kubernetes.io/hostname":        n.Name,
				"kubernetes.io/os":              "linux",
				"kubernetes.io/arch":            "amd64",
				"topology.kubernetes.io/zone":   n.Zone,
				"topology.kubernetes.io/region": "region-1",
				"netpulse.io/simulated":         "true",
			},
		}}
		created, err := nodes.Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("simcluster: create node %s: %w", n.Name, err)
		}
		now := metav1.Now()
		created.Status = corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: n.IPv4.String()},
				{Type: corev1.NodeInternalIP, Address: n.IPv6.String()},
				{Type: corev1.NodeHostName, Address: n.Name},
			},
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				Message: "simulated by netpulse simcluster", LastHeartbeatTime: now, LastTransitionTime: now,
			}},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.36.3-simcluster", OperatingSystem: "linux", Architecture: "amd64"},
		}
		if _, err := nodes.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("simcluster: node %s status: %w", n.Name, err)
		}
	}
	return nil
}
