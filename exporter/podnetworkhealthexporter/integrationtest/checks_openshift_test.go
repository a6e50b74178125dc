// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package integrationtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	ocv1alpha1 "github.com/netpulse/netpulse/api/openshift/operatorcontrolplane/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/checkstatus"
	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/testbed/kubetest"
)

// OpenShift's PodNetworkConnectivityCheck, served through the generated typed client
// against a real API server (its CRD as testdata/crds has it, the gateway with
// deploy/rbac's openshift-checks role): the gateway places it on its source pod's node
// (labels), and a failure reported from there reaches its status with OpenShift's reasons
// and an outage.
func TestPodNetworkConnectivityCheckServed(t *testing.T) {
	requireCluster(t)
	ctx := context.Background()
	require.NoError(t, kubetest.Apply(ctx, cp.Config, kubetest.DeployPath("..", "testdata", "crds")))
	client, err := versioned.NewForConfig(cp.Config)
	require.NoError(t, err)
	const ns, name = "checks-openshift", "web-to-db"
	web := makePod(t, ns, "web", "node-a")
	runningPodStatus(t, web, "10.244.0.30")
	_, err = client.ControlplaneV1alpha1().PodNetworkConnectivityChecks(ns).Create(ctx, &ocv1alpha1.PodNetworkConnectivityCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       ocv1alpha1.PodNetworkConnectivityCheckSpec{SourcePod: "web", TargetEndpoint: "10.244.1.20:5432"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	cfg := testConfig("pnh-checks-openshift")
	cfg.Checks.Enabled, cfg.Checks.OpenShift = true, true
	cfg.Checks.Heartbeat = time.Minute
	cfg.RequireAuthenticatedObservers = false
	exp := startLogsExporter(t, cfg, "gw-os")
	defer func() { require.NoError(t, exp.Shutdown(ctx)) }()

	get := func() *ocv1alpha1.PodNetworkConnectivityCheck {
		pc, err := client.ControlplaneV1alpha1().PodNetworkConnectivityChecks(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return pc
	}
	require.Eventually(t, func() bool {
		return get().Labels[v1alpha1.LabelVantageNode] == "node-a"
	}, 30*time.Second, 200*time.Millisecond, "placed on the source pod's node")

	require.Eventually(t, func() bool {
		ld := checkRecord(ns, name, time.Now(), false)
		ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes().PutStr(contract.CheckKind, ocv1alpha1.Kind)
		require.NoError(t, exp.ConsumeLogs(ctx, ld))
		st := get().Status
		return len(st.Conditions) == 1 && st.Conditions[0].Type == ocv1alpha1.Reachable &&
			st.Conditions[0].Status == metav1.ConditionFalse && st.Conditions[0].Reason == checkstatus.ReasonTCPConnectError &&
			len(st.Outages) == 1 && len(st.Failures) > 0
	}, 30*time.Second, 500*time.Millisecond, "the failure reaches the status: %+v", get().Status)
}
