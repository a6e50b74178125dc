// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package helmtest

import (
	"context"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiPriorityAndFairness renders the PriorityLevelConfiguration and FlowSchema
// netpulse-gateway by default: Limited, the values' shares, one queue sized for the shards,
// the gateway ServiceAccount of the release namespace, its writes only (not its Lease);
// apiPriorityAndFairness.enabled=false renders neither. (Their effect on a real API server:
// TestInstallUpgradeUninstall, requireGatewayClassified.)
func TestTemplateAPIPriorityAndFairness(t *testing.T) {
	objs := render(t, nil)
	pl := mustFind(t, objs, "PriorityLevelConfiguration", "netpulse-gateway")
	fs := mustFind(t, objs, "FlowSchema", "netpulse-gateway")
	require.Equal(t, "Limited", nested(pl, "spec", "type"))
	lim := nested(pl, "spec", "limited").(map[string]any)
	require.EqualValues(t, 2, lim["nominalConcurrencyShares"])
	require.EqualValues(t, 50, lim["lendablePercent"])
	require.EqualValues(t, 0, lim["borrowingLimitPercent"], "the bound: never borrows above its own seats")
	require.Equal(t, "Queue", nested(pl, "spec", "limited", "limitResponse", "type"))
	require.EqualValues(t, 50, nested(pl, "spec", "limited", "limitResponse", "queuing", "queueLengthLimit"))
	require.Equal(t, "netpulse-gateway", nested(fs, "spec", "priorityLevelConfiguration", "name"))
	require.Less(t, nested(fs, "spec", "matchingPrecedence").(float64), float64(9000), "ahead of the suggested service-accounts schema")
	require.Equal(t, "ByUser", nested(fs, "spec", "distinguisherMethod", "type"))
	rules := nested(fs, "spec", "rules").([]any)
	require.Len(t, rules, 1)
	rule := rules[0].(map[string]any)
	require.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "serviceAccount": map[string]any{"name": "netpulse-gateway", "namespace": "netpulse"}}}, rule["subjects"])
	res := rule["resourceRules"].([]any)[0].(map[string]any)
	require.Equal(t, []any{"create", "update", "patch", "delete", "deletecollection"}, res["verbs"], "writes only")
	require.NotContains(t, res["apiGroups"], "coordination.k8s.io", "the Lease is not behind the writes")
	require.NotContains(t, res["apiGroups"], "*")

	// The release namespace's ServiceAccount; a longer queue for more shards; the values.
	objs = render(t, map[string]any{
		"gateway": map[string]any{"shards": 8},
		"apiPriorityAndFairness": map[string]any{
			"nominalConcurrencyShares": 4, "lendablePercent": 0, "borrowingLimitPercent": 100, "matchingPrecedence": 500,
		},
	}, "--namespace", "observability")
	pl = mustFind(t, objs, "PriorityLevelConfiguration", "netpulse-gateway")
	fs = mustFind(t, objs, "FlowSchema", "netpulse-gateway")
	require.EqualValues(t, 80, nested(pl, "spec", "limited", "limitResponse", "queuing", "queueLengthLimit"))
	require.EqualValues(t, 4, nested(pl, "spec", "limited", "nominalConcurrencyShares"))
	require.EqualValues(t, 0, nested(pl, "spec", "limited", "lendablePercent"))
	require.EqualValues(t, 100, nested(pl, "spec", "limited", "borrowingLimitPercent"))
	require.EqualValues(t, 500, nested(fs, "spec", "matchingPrecedence"))
	sub := nested(fs, "spec", "rules").([]any)[0].(map[string]any)["subjects"].([]any)[0]
	require.Equal(t, "observability", nested(sub.(map[string]any), "serviceAccount", "namespace"))
	objs = render(t, map[string]any{"apiPriorityAndFairness": map[string]any{"queueLengthLimit": 7}})
	require.EqualValues(t, 7, nested(mustFind(t, objs, "PriorityLevelConfiguration", "netpulse-gateway"), "spec", "limited", "limitResponse", "queuing", "queueLengthLimit"))

	n := kinds(render(t, map[string]any{"apiPriorityAndFairness": map[string]any{"enabled": false}}))
	require.Zero(t, n["FlowSchema"])
	require.Zero(t, n["PriorityLevelConfiguration"])

	// The schema refuses what the API server would (a share of 0 would never run a write).
	_, chart := helm(t)
	_, err := runHelm(t, "template", chart, "--set", "apiPriorityAndFairness.nominalConcurrencyShares=0")
	require.Error(t, err)
}

// apfHeaders keeps the API Priority and Fairness classification of the last response: the
// API server sets the UIDs of the FlowSchema and priority level a request was classified
// into on every response (X-Kubernetes-PF-FlowSchema-UID, X-Kubernetes-PF-PriorityLevel-UID).
type apfHeaders struct {
	mu     sync.Mutex
	fs, pl string
}

func (h *apfHeaders) RoundTrip(rt http.RoundTripper, r *http.Request) (*http.Response, error) {
	resp, err := rt.RoundTrip(r)
	if resp != nil {
		h.mu.Lock()
		h.fs = resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID)
		h.pl = resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID)
		h.mu.Unlock()
	}
	return resp, err
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// classifyAs makes one request as user (impersonated by admin) and returns the UIDs of the
// FlowSchema and priority level the API server classified it into.
func classifyAs(t *testing.T, admin *rest.Config, user string, do func(kubernetes.Interface) error) (fs, pl string) {
	t.Helper()
	var h apfHeaders
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user} // the API server adds a ServiceAccount's groups
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) { return h.RoundTrip(rt, r) })
	})
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	require.NoError(t, do(cs))
	h.mu.Lock()
	defer h.mu.Unlock()
	require.NotEmpty(t, h.fs, "no %s header: is API Priority and Fairness off?", flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID)
	return h.fs, h.pl
}

// requireGatewayClassified proves on the API server that the installed FlowSchema
// netpulse-gateway classifies the gateway ServiceAccount's writes into the
// PriorityLevelConfiguration netpulse-gateway, and leaves its Lease and its reads to the
// suggested service-accounts schema (workload-low): requests made as the ServiceAccount
// (impersonated), compared by the UIDs the API server answers with.
func requireGatewayClassified(t *testing.T, cs kubernetes.Interface, admin *rest.Config, ns string) {
	t.Helper()
	ctx := context.Background()
	fs, err := cs.FlowcontrolV1().FlowSchemas().Get(ctx, "netpulse-gateway", metav1.GetOptions{})
	require.NoError(t, err)
	pl, err := cs.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, "netpulse-gateway", metav1.GetOptions{})
	require.NoError(t, err)
	saFS, err := cs.FlowcontrolV1().FlowSchemas().Get(ctx, "service-accounts", metav1.GetOptions{})
	require.NoError(t, err, "the suggested service-accounts FlowSchema")
	saPL, err := cs.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, saFS.Spec.PriorityLevelConfiguration.Name, metav1.GetOptions{})
	require.NoError(t, err)
	user := "system:serviceaccount:" + ns + ":netpulse-gateway"
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

	event := gatewayEvent(ns)
	// The API server's flow-control configuration follows the new objects within moments.
	require.Eventually(t, func() bool {
		got, _ := classifyAs(t, admin, user, event)
		return got == string(fs.UID)
	}, 30*time.Second, 200*time.Millisecond, "the gateway's Event create never classified into FlowSchema netpulse-gateway")

	for _, c := range []struct {
		what   string
		do     func(kubernetes.Interface) error
		fs, pl string
	}{
		{"an Event create", event, string(fs.UID), string(pl.UID)},
		{"a TokenReview", func(cs kubernetes.Interface) error {
			_, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "not-a-token"}}, metav1.CreateOptions{})
			return err
		}, string(fs.UID), string(pl.UID)},
		{"a Lease create", func(cs kubernetes.Interface) error {
			_, err := cs.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "netpulse-apf-probe"}}, dry)
			return err
		}, string(saFS.UID), string(saPL.UID)},
		{"a pod list", func(cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
			return err
		}, string(saFS.UID), string(saPL.UID)},
	} {
		gotFS, gotPL := classifyAs(t, admin, user, c.do)
		require.Equal(t, c.fs, gotFS, "%s as %s: FlowSchema UID", c.what, user)
		require.Equal(t, c.pl, gotPL, "%s as %s: priority level UID", c.what, user)
	}

	// The seats docs/helm.md states: ceil(600 x 2 / (245 + 2)) = 5 at the API server's
	// default limits (kubetest sets none), and no borrowing above them.
	metrics, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	require.NoError(t, err)
	for name, want := range map[string]string{"nominal_limit_seats": "5", "upper_limit_seats": "5"} {
		m := regexp.MustCompile(`(?m)^apiserver_flowcontrol_` + name + `\{priority_level="netpulse-gateway"\} (\S+)$`).FindSubmatch(metrics)
		require.NotNil(t, m, "apiserver_flowcontrol_%s of netpulse-gateway", name)
		require.Equal(t, want, string(m[1]), "apiserver_flowcontrol_%s of netpulse-gateway", name)
	}
}

// gatewayEvent creates (dry run) an Event in ns, as the gateway's writer does.
func gatewayEvent(ns string) func(kubernetes.Interface) error {
	return func(cs kubernetes.Interface) error {
		_, err := cs.CoreV1().Events(ns).Create(context.Background(), &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "netpulse-apf-probe", Namespace: ns},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "netpulse-gateway-0"},
			Reason:         "ApfProbe", Message: "classification test", Type: corev1.EventTypeNormal,
			Source: corev1.EventSource{Component: "netpulse-test"},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
}

// requireGatewayUnclassified: with apiPriorityAndFairness off the chart's objects are gone
// and the gateway's writes fall back to the suggested service-accounts FlowSchema.
func requireGatewayUnclassified(t *testing.T, cs kubernetes.Interface, admin *rest.Config, ns string) {
	t.Helper()
	ctx := context.Background()
	_, err := cs.FlowcontrolV1().FlowSchemas().Get(ctx, "netpulse-gateway", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "FlowSchema netpulse-gateway left: %v", err)
	_, err = cs.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, "netpulse-gateway", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "PriorityLevelConfiguration netpulse-gateway left: %v", err)
	saFS, err := cs.FlowcontrolV1().FlowSchemas().Get(ctx, "service-accounts", metav1.GetOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, _ := classifyAs(t, admin, "system:serviceaccount:"+ns+":netpulse-gateway", gatewayEvent(ns))
		return got == string(saFS.UID)
	}, 30*time.Second, 200*time.Millisecond, "the gateway's Event create not back under service-accounts")
}
