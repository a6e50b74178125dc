/*
Copyright The netpulse Authors.

SPDX-License-Identifier: Apache-2.0
*/

package test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/testbed/kubetest"
)

var (
	networkCheckCRDPath = filepath.Join("..", "..", "..", "deploy", "crds", "netpulse.io_networkchecks.yaml")
	pnccCRDPath         = filepath.Join("..", "..", "..", "testdata", "crds", "controlplane.operator.openshift.io_podnetworkconnectivitychecks.yaml")
)

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func validCheck(ns, name string) *v1alpha1.NetworkCheck {
	return &v1alpha1.NetworkCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.NetworkCheckSpec{
			Source: v1alpha1.CheckSource{PodName: "client-0"},
			Target: v1alpha1.CheckTarget{Service: &v1alpha1.CheckServiceTarget{Name: "backend", Port: 80}},
		},
	}
}

// TestNetworkCheckValidation: the CRD's CEL rules and patterns, on the real API server.
func TestNetworkCheckValidation(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	c := pnhClient.NetpulseV1alpha1().NetworkChecks(ns)
	ok := []func(*v1alpha1.NetworkCheck){
		func(*v1alpha1.NetworkCheck) {},
		func(nc *v1alpha1.NetworkCheck) {
			nc.Spec.Target = v1alpha1.CheckTarget{URL: "https://example.com/healthz"}
			nc.Spec.Probe = v1alpha1.ProbeTypeHTTP
			nc.Spec.Interval = dur(10 * time.Second)
		},
		func(nc *v1alpha1.NetworkCheck) { nc.Spec.Target = v1alpha1.CheckTarget{Address: "[fd00::1]:6443"} },
		func(nc *v1alpha1.NetworkCheck) { nc.Spec.Target = v1alpha1.CheckTarget{Address: "api.example.com:443"} },
		func(nc *v1alpha1.NetworkCheck) {
			nc.Spec.Target = v1alpha1.CheckTarget{Pod: &v1alpha1.CheckPodTarget{Name: "db-0"}}
			nc.Spec.Probe = v1alpha1.ProbeTypeICMP
		},
		func(nc *v1alpha1.NetworkCheck) {
			nc.Spec.Source = v1alpha1.CheckSource{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
		},
	}
	for i, mutate := range ok {
		nc := validCheck(ns, "ok-"+string(rune('a'+i)))
		mutate(nc)
		if _, err := c.Create(ctx, nc, metav1.CreateOptions{}); err != nil {
			t.Errorf("valid check %d refused: %v", i, err)
		}
	}
	bad := []struct {
		name, want string
		mutate     func(*v1alpha1.NetworkCheck)
	}{
		{"two-targets", "exactly one of pod, service, address and url", func(nc *v1alpha1.NetworkCheck) { nc.Spec.Target.Address = "10.0.0.1:80" }},
		{"no-target", "exactly one of pod, service, address and url", func(nc *v1alpha1.NetworkCheck) { nc.Spec.Target = v1alpha1.CheckTarget{} }},
		{"two-sources", "exactly one of podName and podSelector", func(nc *v1alpha1.NetworkCheck) {
			nc.Spec.Source.PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		}},
		{"no-source", "exactly one of podName and podSelector", func(nc *v1alpha1.NetworkCheck) { nc.Spec.Source = v1alpha1.CheckSource{} }},
		{"fast", "interval must be between 10s and 1h", func(nc *v1alpha1.NetworkCheck) { nc.Spec.Interval = dur(time.Second) }},
		{"slow-timeout", "timeout must be between 100ms and 30s", func(nc *v1alpha1.NetworkCheck) { nc.Spec.Timeout = dur(time.Minute) }},
		{"credentials", "url must be an http(s) URL without user information", func(nc *v1alpha1.NetworkCheck) {
			nc.Spec.Target = v1alpha1.CheckTarget{URL: "https://user:pw@example.com/"}
		}},
		{"ftp", "url must be an http(s) URL without user information", func(nc *v1alpha1.NetworkCheck) {
			nc.Spec.Target = v1alpha1.CheckTarget{URL: "ftp://example.com/"}
		}},
		{"http-no-url", "probe http needs a url target", func(nc *v1alpha1.NetworkCheck) { nc.Spec.Probe = v1alpha1.ProbeTypeHTTP }},
		{"url-tcp", "a url target is probed with http", func(nc *v1alpha1.NetworkCheck) {
			nc.Spec.Target = v1alpha1.CheckTarget{URL: "http://example.com/"}
			nc.Spec.Probe = v1alpha1.ProbeTypeTCP
		}},
		{"pod-no-port", "a pod target needs a port unless the probe is icmp", func(nc *v1alpha1.NetworkCheck) {
			nc.Spec.Target = v1alpha1.CheckTarget{Pod: &v1alpha1.CheckPodTarget{Name: "db-0"}}
		}},
		{"address-no-port", "spec.target.address", func(nc *v1alpha1.NetworkCheck) { nc.Spec.Target = v1alpha1.CheckTarget{Address: "10.0.0.1"} }},
		{"dns-probe", "spec.probe", func(nc *v1alpha1.NetworkCheck) { nc.Spec.Probe = v1alpha1.ProbeTypeDNS }},
	}
	for _, tc := range bad {
		nc := validCheck(ns, tc.name)
		tc.mutate(nc)
		_, err := c.Create(ctx, nc, metav1.CreateOptions{})
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want Invalid mentioning %q", tc.name, err, tc.want)
		}
	}
}

// TestNetworkCheckRBAC: the shipped user role (deploy/rbac/checks.yaml) lets a user declare
// checks in the namespaces they are bound in only, and never write a check's status (the
// vantage point and the verdict are the gateway's).
func TestNetworkCheckRBAC(t *testing.T) {
	ctx := testContext(t)
	mine, other := namespace(t, ctx), namespace(t, ctx)
	if err := kubetest.Apply(ctx, cp.Config, kubetest.DeployPath("rbac", "checks.yaml")); err != nil {
		t.Fatal(err)
	}
	// Bind the editor role (aggregated into edit/admin in a real cluster) in one namespace.
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "dev-checks"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "netpulse-networkcheck-editor"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: mine, Name: "dev"}},
	}
	if _, err := kube.RbacV1().RoleBindings(mine).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := cp.ServiceAccountConfig(ctx, mine, "dev")
	if err != nil {
		t.Fatal(err)
	}
	var dev versioned.Interface
	if dev, err = kubeclient.PodNetworkHealthClient(cfg); err != nil {
		t.Fatal(err)
	}
	// RBAC bindings take effect at once, but give the authorizer's cache a moment.
	var created *v1alpha1.NetworkCheck
	deadline := time.Now().Add(10 * time.Second)
	for {
		created, err = dev.NetpulseV1alpha1().NetworkChecks(mine).Create(ctx, validCheck(mine, "mine"), metav1.CreateOptions{})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create in own namespace: %v", err)
	}
	if _, err := dev.NetpulseV1alpha1().NetworkChecks(other).Create(ctx, validCheck(other, "theirs"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create in another namespace: %v, want Forbidden", err)
	}
	created.Status.Reachability = v1alpha1.Reachable
	created.Status.Vantage = &v1alpha1.CheckVantage{Mode: v1alpha1.VantageAgent, SourcePod: "client-0", Node: "node-1"}
	if _, err := dev.NetpulseV1alpha1().NetworkChecks(mine).UpdateStatus(ctx, created, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("status update by the user: %v, want Forbidden", err)
	}
}
