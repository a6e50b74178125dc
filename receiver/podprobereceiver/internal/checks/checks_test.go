// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ocv1alpha1 "github.com/netpulse/netpulse/api/openshift/operatorcontrolplane/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/checkstatus"
	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/targetpolicy"
)

func accepted(nc *v1alpha1.NetworkCheck, endpoint string) *v1alpha1.NetworkCheck {
	nc.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionAccepted, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonCheckAccepted}}
	nc.Status.Target = &v1alpha1.CheckResolvedTarget{Endpoint: endpoint, Kind: "Service"}
	return nc
}

func TestAssignments(t *testing.T) {
	nc := &v1alpha1.NetworkCheck{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-to-db"},
		Spec: v1alpha1.NetworkCheckSpec{Target: v1alpha1.CheckTarget{Service: &v1alpha1.CheckServiceTarget{Name: "db", Port: 80}}}}
	_, err := FromNetworkCheck(nc)
	require.ErrorContains(t, err, "not accepted", "nothing runs before the gateway placed and resolved it")
	a, err := FromNetworkCheck(accepted(nc, "10.0.0.9:80"))
	require.NoError(t, err)
	assert.Equal(t, Assignment{Kind: KindNetworkCheck, Namespace: "shop", Name: "web-to-db", Probe: contract.ProbeTypeTCP,
		Endpoint: "10.0.0.9:80", Interval: DefaultInterval, Timeout: DefaultTimeout}, a)

	url := accepted(nc.DeepCopy(), "https://db.shop:8443/health")
	url.Spec.Target = v1alpha1.CheckTarget{URL: "https://db.shop:8443/health"}
	url.Spec.Interval = &metav1.Duration{Duration: 15 * time.Second}
	a, err = FromNetworkCheck(url)
	require.NoError(t, err)
	assert.Equal(t, contract.ProbeTypeHTTP, a.Probe)
	assert.Equal(t, 15*time.Second, a.Interval)

	slow := accepted(nc.DeepCopy(), "10.0.0.9:80")
	slow.Spec.Interval, slow.Spec.Timeout = &metav1.Duration{Duration: 10 * time.Second}, &metav1.Duration{Duration: 10 * time.Second}
	_, err = FromNetworkCheck(slow)
	require.ErrorContains(t, err, "below the interval")

	pc := &ocv1alpha1.PodNetworkConnectivityCheck{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-network-diagnostics", Name: "a-to-b",
		Annotations: map[string]string{v1alpha1.AnnotationCheckInterval: "10s"}},
		Spec: ocv1alpha1.PodNetworkConnectivityCheckSpec{SourcePod: "a", TargetEndpoint: "api.example:6443"}}
	a, err = FromPNCC(pc)
	require.NoError(t, err)
	assert.Equal(t, 10*time.Second, a.Interval)
	assert.Equal(t, contract.ProbeTypeTCP, a.Probe)
	pc.Annotations[v1alpha1.AnnotationCheckInterval] = "1s"
	_, err = FromPNCC(pc)
	require.ErrorContains(t, err, "below")
	pc.Annotations = nil
	pc.Spec.TargetEndpoint = "no-port"
	_, err = FromPNCC(pc)
	require.ErrorContains(t, err, "host:port")
}

type countingListener struct {
	net.Listener
	accepted atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

// Runs over real loopback sockets: the policy refuses before anything is sent; allowed, the
// run succeeds with the local address; a failed lookup is a DNSError; HTTP answers.
func TestRun(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cl := &countingListener{Listener: ln}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	srv.Listener = cl
	srv.Start()
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	ep := "127.0.0.1:" + itoa(port)
	ctx := context.Background()
	res := fakeResolver{"db.local": {netip.MustParseAddr("127.0.0.1")}}
	a := Assignment{Kind: KindNetworkCheck, Namespace: "shop", Name: "x", Probe: contract.ProbeTypeTCP, Endpoint: ep, Interval: 10 * time.Second, Timeout: time.Second}

	r := Run(ctx, a, targetpolicy.Policy{}, res)
	assert.False(t, r.Success)
	assert.Equal(t, checkstatus.ReasonTargetRefused, r.Reason)
	a.Endpoint = "db.local:" + itoa(port)
	r = Run(ctx, a, targetpolicy.Policy{}, res)
	assert.Equal(t, checkstatus.ReasonTargetRefused, r.Reason, "a name resolving to loopback is refused too")
	assert.Zero(t, cl.accepted.Load(), "nothing was sent to a refused target")

	allow := targetpolicy.Policy{AllowLoopback: true}
	r = Run(ctx, a, allow, res)
	require.True(t, r.Success, r.Message)
	assert.Equal(t, checkstatus.ReasonTCPConnect, r.Reason)
	assert.Equal(t, "127.0.0.1", r.Local.String())
	assert.Contains(t, r.Message, "tcp connection to db.local:")

	a.Endpoint = "missing.local:80"
	r = Run(ctx, a, allow, res)
	assert.Equal(t, checkstatus.ReasonDNSError, r.Reason)
	assert.True(t, strings.HasPrefix(r.Message, "failure looking up host missing.local"), r.Message)

	a.Probe, a.Endpoint = contract.ProbeTypeHTTP, "http://"+ep+"/healthz"
	r = Run(ctx, a, allow, res)
	require.True(t, r.Success, r.Message)
	assert.Equal(t, checkstatus.ReasonHTTPRequest, r.Reason)
	assert.Equal(t, "127.0.0.1", r.Local.String())

	_ = srv.Listener.Close()
	a.Probe, a.Endpoint = contract.ProbeTypeTCP, ep
	r = Run(ctx, a, allow, res)
	assert.Equal(t, checkstatus.ReasonTCPConnectError, r.Reason, "a closed port")
	assert.Contains(t, r.Message, "failed to establish a TCP connection to")
}

func itoa(i int) string { return strconv.Itoa(i) }
