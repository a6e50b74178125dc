// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	ocv1alpha1 "github.com/netpulse/netpulse/api/openshift/operatorcontrolplane/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/checkstatus"
	"github.com/netpulse/netpulse/testbed/kubetest"
	"github.com/netpulse/netpulse/testbed/simcluster"
)

// checksNamespace is where the declared-check scenario's workloads and checks live; its
// default service account (the sidecar's) is allowed by the gateway's k8s_token_auth in
// gatewayViewConfig, as docs/checks.md tells users to do.
const checksNamespace = "checks"

// sidecarPod is a workload pod with the shipped sidecar patch (deploy/sidecar/patch.yaml)
// applied: its label, container and volumes.
func sidecarPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	raw, err := os.ReadFile(kubetest.DeployPath("sidecar", "patch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(raw, &d); err != nil {
		t.Fatalf("deploy/sidecar/patch.yaml: %v", err)
	}
	pod := workloadPod(name, map[string]string{"app": "client"})
	for k, v := range d.Spec.Template.Labels {
		pod.Labels[k] = v
	}
	pod.Spec.Containers = append(pod.Spec.Containers, d.Spec.Template.Spec.Containers...)
	pod.Spec.Volumes = append(pod.Spec.Volumes, d.Spec.Template.Spec.Volumes...)
	return pod
}

func workloadPod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: checksNamespace, Name: name, Labels: labels},
		Spec: corev1.PodSpec{ServiceAccountName: "default",
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
}

func networkCheck(name string, src string, target v1alpha1.CheckTarget) *v1alpha1.NetworkCheck {
	return &v1alpha1.NetworkCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: checksNamespace, Name: name},
		Spec: v1alpha1.NetworkCheckSpec{Source: v1alpha1.CheckSource{PodName: src}, Target: target,
			Interval: &metav1.Duration{Duration: 10 * time.Second}, Timeout: &metav1.Duration{Duration: 3 * time.Second}},
	}
}

// TestDeclaredChecks: declared checks on the real control plane and the simulated cluster,
// with the unchanged deploy/ configs (agents and gateway) and the shipped sidecar patch:
//   - pod→Service from a sidecar (the source address the target sees is the workload pod's
//     own), pod→URL from the agent on the source's node, each Reachable with latency;
//   - a refused target (metadata address) and a missing source pod say so;
//   - OpenShift's PodNetworkConnectivityCheck (its CRD installed) served with its semantics;
//   - partitioning the target: outages with start and end logs, the Reachable condition and
//     both Events on every check.
func TestDeclaredChecks(t *testing.T) {
	e := requireMesh(t)
	cl := e.cl
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if err := kubetest.EnsureNamespace(ctx, cl.Client, checksNamespace); err != nil {
		t.Fatal(err)
	}
	// The sidecar's Role and RoleBinding in the workload namespace.
	objs, err := kubetest.DecodeFile(kubetest.DeployPath("sidecar", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cl.AdminConfig)
	for _, o := range objs {
		o.SetNamespace(checksNamespace)
		gvr := map[string]string{"Role": "roles", "RoleBinding": "rolebindings"}[o.GetKind()]
		if _, err := dyn.Resource(rbacGVR(gvr)).Namespace(checksNamespace).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	web, err := cl.StartWorkload(ctx, simcluster.WorkloadOptions{Pod: workloadPod("web-0", map[string]string{"app": "web"}), Node: "node-2"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.StopWorkload(context.Background(), web) }()
	rec, err := cl.Serve(ctx, web, 8080)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateService(ctx, checksNamespace, "web", 80, 8080, map[string]string{"app": "web"}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.DeleteService(context.Background(), checksNamespace, "web") }()
	sidecarCfg, _ := filepath.Abs(kubetest.DeployPath("sidecar", "config", "sidecar.yaml"))
	withSidecar, err := cl.StartWorkload(ctx, simcluster.WorkloadOptions{Pod: sidecarPod(t, "client-0"), Node: "node-1",
		Sidecar: "netpulse-sidecar", SidecarConfig: sidecarCfg,
		ExtraEnv: map[string]string{"NETPULSE_GATEWAY_ENDPOINT": e.gw.Endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.StopWorkload(context.Background(), withSidecar) }()
	plain, err := cl.StartWorkload(ctx, simcluster.WorkloadOptions{Pod: workloadPod("client-1", map[string]string{"app": "client"}), Node: "node-3"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.StopWorkload(context.Background(), plain) }()
	agent3, ok := cl.Agent("node-3")
	if !ok {
		t.Fatal("no agent on node-3")
	}

	ncs := e.api.pnh.NetpulseV1alpha1().NetworkChecks(checksNamespace)
	create := func(nc *v1alpha1.NetworkCheck) {
		t.Helper()
		if _, err := ncs.Create(ctx, nc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	create(networkCheck("svc-from-sidecar", "client-0", v1alpha1.CheckTarget{Service: &v1alpha1.CheckServiceTarget{Name: "web", Port: 80}}))
	url := fmt.Sprintf("http://%s:8080/healthz", web.IPv4)
	create(networkCheck("url-from-agent", "client-1", v1alpha1.CheckTarget{URL: url}))
	create(networkCheck("metadata", "client-1", v1alpha1.CheckTarget{Address: "169.254.169.254:80"}))
	create(networkCheck("no-source", "nobody", v1alpha1.CheckTarget{Service: &v1alpha1.CheckServiceTarget{Name: "web", Port: 80}}))
	pncc := &unstructured.Unstructured{}
	pncc.SetAPIVersion(ocv1alpha1.SchemeGroupVersion.String())
	pncc.SetKind(ocv1alpha1.Kind)
	pncc.SetNamespace(checksNamespace)
	pncc.SetName("client-1-to-web")
	pncc.SetAnnotations(map[string]string{v1alpha1.AnnotationCheckInterval: "10s"})
	pncc.Object["spec"] = map[string]any{"sourcePod": "client-1", "targetEndpoint": fmt.Sprintf("%s:8080", web.IPv4)}
	pnccs := dyn.Resource(ocv1alpha1.GroupVersionResource).Namespace(checksNamespace)
	if _, err := pnccs.Create(ctx, pncc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	getNC := func(name string) *v1alpha1.NetworkCheck {
		nc, err := ncs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return nc
	}
	getPNCC := func() *ocv1alpha1.PodNetworkConnectivityCheck {
		u, err := pnccs.Get(ctx, "client-1-to-web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var c ocv1alpha1.PodNetworkConnectivityCheck
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err != nil {
			t.Fatal(err)
		}
		return &c
	}
	pnccCond := func(c *ocv1alpha1.PodNetworkConnectivityCheck) *ocv1alpha1.PodNetworkConnectivityCheckCondition {
		for i := range c.Status.Conditions {
			if c.Status.Conditions[i].Type == ocv1alpha1.Reachable {
				return &c.Status.Conditions[i]
			}
		}
		return nil
	}
	await := func(what string, timeout time.Duration, ok func() (bool, string)) time.Duration {
		t.Helper()
		began := time.Now()
		last := ""
		for time.Since(began) < timeout {
			done, why := ok()
			if done {
				return time.Since(began)
			}
			last = why
			time.Sleep(500 * time.Millisecond)
		}
		t.Fatalf("%s: not within %v: %s", what, timeout, last)
		return 0
	}

	// 1. Placement, reachability, latency, vantage.
	took := await("checks reachable", 90*time.Second, func() (bool, string) {
		for _, n := range []string{"svc-from-sidecar", "url-from-agent"} {
			nc := getNC(n)
			if nc.Status.Reachability != v1alpha1.Reachable || nc.Status.Latency == nil || len(nc.Status.Successes) == 0 {
				return false, fmt.Sprintf("%s: %+v", n, nc.Status)
			}
		}
		c := pnccCond(getPNCC())
		if c == nil || c.Status != metav1.ConditionTrue {
			return false, fmt.Sprintf("pncc: %+v", getPNCC().Status)
		}
		return true, ""
	})
	t.Logf("E2E declared checks reachable: %.1fs after creation", took.Seconds())
	sc := getNC("svc-from-sidecar")
	if v := sc.Status.Vantage; v == nil || v.Mode != v1alpha1.VantageSidecar || v.SourcePod != "client-0" || v.Node != "node-1" ||
		v.SourceAddress != withSidecar.IPv4.String() || v.ObserverPod != checksNamespace+"/client-0" {
		t.Errorf("svc-from-sidecar vantage %+v, want Sidecar from client-0 (%s) on node-1", sc.Status.Vantage, withSidecar.IPv4)
	}
	if sc.Status.Target == nil || sc.Status.Target.Kind != "Service" || !strings.HasPrefix(sc.Status.Target.Endpoint, "10.0.0.") {
		t.Errorf("svc-from-sidecar target %+v, want the Service's ClusterIP:80", sc.Status.Target)
	}
	if s := sc.Status.Successes[0]; s.Reason != checkstatus.ReasonTCPConnect || s.Latency == "" {
		t.Errorf("svc-from-sidecar newest success %+v, want a TCPConnect with latency", s)
	}
	ua := getNC("url-from-agent")
	if v := ua.Status.Vantage; v == nil || v.Mode != v1alpha1.VantageAgent || v.Node != "node-3" || v.ObserverPod != agent3.Namespace+"/"+agent3.Pod {
		t.Errorf("url-from-agent vantage %+v, want Agent %s on node-3", ua.Status.Vantage, agent3.Pod)
	}
	if s := ua.Status.Successes[0]; s.Reason != checkstatus.ReasonHTTPRequest {
		t.Errorf("url-from-agent newest success %+v, want HTTPRequest", s)
	}
	// The source address the target saw: the sidecar's probes leave from the workload pod's
	// own address; the agent's from the agent pod's (the node's first pod address here).
	if rec.Count(withSidecar.IPv4) == 0 {
		t.Errorf("the target never saw the sidecar's pod address %s; it saw %v", withSidecar.IPv4, rec.Peers())
	}
	if rec.Count(agent3.IPs[0]) == 0 {
		t.Errorf("the target never saw the node-3 agent's address %s; it saw %v", agent3.IPs[0], rec.Peers())
	}
	if rec.Count(plain.IPv4) != 0 {
		t.Errorf("the target saw client-1's own address %s, which has no sidecar", plain.IPv4)
	}
	pc := getPNCC()
	if c := pnccCond(pc); c.Reason != checkstatus.ReasonTCPConnectSuccess || !strings.Contains(c.Message, "tcp connection to") {
		t.Errorf("pncc Reachable %+v, want TCPConnectSuccess", c)
	}
	if len(pc.Status.Successes) == 0 || pc.Status.Successes[0].Reason != ocv1alpha1.LogEntryReasonTCPConnect {
		t.Errorf("pncc successes %+v, want TCPConnect entries", pc.Status.Successes)
	}
	if l := getPNCCLabels(t, ctx, dyn); l[v1alpha1.LabelVantageNode] != "node-3" || l[v1alpha1.LabelVantageMode] != string(v1alpha1.VantageAgent) {
		t.Errorf("pncc placement labels %v, want the node-3 agent", l)
	}

	// 2. Bad input: a refused target sends nothing; a missing source is named.
	for name, reason := range map[string]string{"metadata": v1alpha1.ReasonTargetRefused, "no-source": v1alpha1.ReasonSourceNotFound} {
		nc := getNC(name)
		c := meta.FindStatusCondition(nc.Status.Conditions, v1alpha1.ConditionAccepted)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason {
			t.Errorf("%s: Accepted %+v, want False/%s", name, c, reason)
			continue
		}
		if len(nc.Labels) != 0 || len(nc.Status.Successes)+len(nc.Status.Failures) != 0 {
			t.Errorf("%s: placed or run (labels %v, %d results) although not accepted", name, nc.Labels, len(nc.Status.Successes)+len(nc.Status.Failures))
		}
		t.Logf("%s: Accepted=False %s: %s", name, c.Reason, c.Message)
	}

	// 3. An outage of the target: start and end logs, the condition, both Events.
	cut := time.Now()
	if err := cl.PartitionWorkload("web-0"); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.HealWorkload("web-0") }()
	took = await("outage detected", 60*time.Second, func() (bool, string) {
		for _, n := range []string{"svc-from-sidecar", "url-from-agent"} {
			nc := getNC(n)
			if nc.Status.Reachability != v1alpha1.Unreachable || len(nc.Status.Outages) == 0 || nc.Status.Outages[0].End != nil {
				return false, fmt.Sprintf("%s: reachability %s outages %d", n, nc.Status.Reachability, len(nc.Status.Outages))
			}
		}
		c := pnccCond(getPNCC())
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == checkstatus.ReasonTCPConnectError, "pncc not False/TCPConnectError"
	})
	t.Logf("E2E declared checks outage detected: %.1fs after the partition", took.Seconds())
	for _, n := range []string{"svc-from-sidecar", "url-from-agent"} {
		o := getNC(n).Status.Outages[0]
		if len(o.StartLogs) == 0 || o.StartLogs[0].Success || !strings.HasPrefix(o.Message, "Connectivity outage detected at") {
			t.Errorf("%s: ongoing outage %+v, want start logs and OpenShift's message", n, o)
		}
	}
	heal := time.Now()
	if err := cl.HealWorkload("web-0"); err != nil {
		t.Fatal(err)
	}
	took = await("outage ended", 60*time.Second, func() (bool, string) {
		for _, n := range []string{"svc-from-sidecar", "url-from-agent"} {
			nc := getNC(n)
			if nc.Status.Reachability != v1alpha1.Reachable || len(nc.Status.Outages) == 0 || nc.Status.Outages[0].End == nil {
				return false, n + " not restored"
			}
		}
		p := getPNCC()
		c := pnccCond(p)
		return c != nil && c.Status == metav1.ConditionTrue && len(p.Status.Outages) > 0 && !p.Status.Outages[0].End.IsZero(), "pncc not restored"
	})
	t.Logf("E2E declared checks outage ended: %.1fs after the heal", took.Seconds())
	// An outage's start and end are its log entries' times: a probe's start (it fails or
	// answers up to its 3 s timeout later: a SYN retransmitted 1 s after a heal answers a
	// probe begun before it), in whole seconds as the API keeps them.
	const probeSlack = time.Second + 3*time.Second
	for _, n := range []string{"svc-from-sidecar", "url-from-agent"} {
		o := getNC(n).Status.Outages[0]
		if len(o.EndLogs) == 0 || !o.EndLogs[0].Success || !strings.HasPrefix(o.Message, "Connectivity restored after") ||
			o.Start.Time.Before(cut.Add(-probeSlack)) || o.End.Time.Before(heal.Add(-probeSlack)) {
			t.Errorf("%s: ended outage %+v, want end logs (the success first) and OpenShift's message, within the partition", n, o)
		}
	}
	p := getPNCC()
	if o := p.Status.Outages[0]; len(o.StartLogs) == 0 || len(o.EndLogs) == 0 || !o.EndLogs[0].Success || len(p.Status.Failures) == 0 ||
		p.Status.Failures[0].Reason != ocv1alpha1.LogEntryReasonTCPConnectError {
		t.Errorf("pncc outage %+v failures %+v, want OpenShift's outage and TCPConnectError failures", o, p.Status.Failures)
	}
	// The Events follow the status writes (they queue behind the checks' verdicts, within
	// the checks' share of the budget): give them a few seconds.
	took = await("outage Events", 20*time.Second, func() (bool, string) {
		for _, obj := range []string{"svc-from-sidecar", "url-from-agent", "client-1-to-web"} {
			for _, reason := range []string{checkstatus.EventOutageDetected, checkstatus.EventRestored} {
				if !e.api.hasEventIn(ctx, checksNamespace, obj, reason, start) {
					return false, obj + ": no " + reason + " Event"
				}
			}
		}
		return true, ""
	})
	t.Logf("E2E declared checks Events: %.1fs after the statuses", took.Seconds())
	if t.Failed() {
		if p := withSidecar.Sidecar(); p != nil {
			t.Logf("sidecar log: %s", p.LogPath)
		}
	}
}

func rbacGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: resource}
}

func getPNCCLabels(t *testing.T, ctx context.Context, dyn dynamic.Interface) map[string]string {
	u, err := dyn.Resource(ocv1alpha1.GroupVersionResource).Namespace(checksNamespace).Get(ctx, "client-1-to-web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u.GetLabels()
}
