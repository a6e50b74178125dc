// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podnetworkhealthexporter

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/netpulse/netpulse/api/client/clientset/versioned/fake"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/checks"
	"github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/relay"
	"github.com/netpulse/netpulse/internal/checkstatus"
	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/internal/identity"
)

// checkResult is one pod_probe check record from reporter (namespace/pod@node).
func checkResult(kind, ns, name string, reporterNS, reporterPod, reporterUID, reporterNode string, at time.Time, ok bool) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	ra := rl.Resource().Attributes()
	ra.PutStr(contract.K8sNamespaceName, reporterNS)
	ra.PutStr(contract.K8sPodName, reporterPod)
	ra.PutStr(contract.K8sPodUID, reporterUID)
	ra.PutStr(contract.K8sNodeName, reporterNode)
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetEventName(contract.CheckResultEvent)
	lr.SetTimestamp(pcommon.NewTimestampFromTime(at))
	lr.Body().SetStr("tcp connection to 10.0.0.9:80 succeeded")
	a := lr.Attributes()
	a.PutStr(contract.CheckKind, kind)
	a.PutStr(contract.CheckNamespace, ns)
	a.PutStr(contract.CheckName, name)
	a.PutBool(contract.CheckSuccess, ok)
	reason := checkstatus.ReasonTCPConnect
	if !ok {
		reason = checkstatus.ReasonTCPConnectError
	}
	a.PutStr(contract.CheckReason, reason)
	a.PutDouble(contract.CheckLatency, 0.002)
	a.PutStr(contract.SourceAddress, "198.18.0.250")
	return ld
}

// The exporter binds check results to the caller's identity with
// require_authenticated_observers (and not without): an unauthenticated record is counted
// as check_unauthenticated and not folded in; the placed agent's is. What the binding
// allows per vantage point is asserted in internal/checks.
func TestCheckResultsBindingIsWired(t *testing.T) {
	for _, require_ := range []bool{true, false} {
		cfg := createDefaultConfig().(*Config)
		cfg.RequireAuthenticatedObservers = require_
		cfg.Checks.Enabled = true
		e, tt, _ := checkTestExporterWithTelemetry(t, cfg)
		// What was folded in is what the status write carries (the reactor is set before
		// the informers start: the fake's reactor chain is not guarded).
		var written v1alpha1.NetworkCheckStatus
		pnh := e.writer.Client().(*fake.Clientset)
		pnh.PrependReactor("patch", "networkchecks", func(a clienttesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() == "status" {
				var ops []struct {
					Value v1alpha1.NetworkCheckStatus `json:"value"`
				}
				require.NoError(t, json.Unmarshal(a.(clienttesting.PatchAction).GetPatch(), &ops))
				written = ops[0].Value
			}
			return true, &v1alpha1.NetworkCheck{}, nil
		})
		startChecks(t, e, kubefake.NewSimpleClientset(runningPod("shop", "web-0", "node-a", "10.0.0.1")), placedCheck("shop", "web-to-db"))
		now := time.Now()
		require.NoError(t, e.consumeLogs(context.Background(), checkResult(v1alpha1.NetworkCheckKind, "shop", "web-to-db", "netpulse", "agent-a", "uid-a", "node-a", now, false)))
		require.NoError(t, e.consumeLogs(viaAuth(agentA), checkResult(v1alpha1.NetworkCheckKind, "shop", "web-to-db", "netpulse", "agent-a", "uid-a", "node-a", now.Add(time.Second), true)))
		if require_ {
			assert.Equal(t, map[string]int64{checks.SkipCheckUnauthentic: 1}, skippedByReason(t, tt))
		} else {
			assert.Empty(t, skippedByReason(t, tt))
		}
		e.checks.Reconcile(context.Background(), now.Add(2*time.Second))
		ctx, cancel := context.WithCancel(context.Background())
		e.writer.Run(ctx, 1)
		require.Eventually(t, func() bool { return e.writer.PendingCount() == 0 }, 5*time.Second, 5*time.Millisecond)
		cancel()
		assert.Len(t, written.Successes, 1)
		if require_ {
			assert.Empty(t, written.Failures, "the unauthenticated failure was not folded in")
		} else {
			assert.Len(t, written.Failures, 1)
		}
		require.NotNil(t, written.Vantage)
		assert.Equal(t, "netpulse/agent-a", written.Vantage.ObserverPod)
	}
}

// Shard 0 folds in check results another shard relayed (gateway.relay: agents send them to
// the shard they reach): bound to the identity the relay vouches for on the Resource, as if
// the agent had sent them itself; a relayed identity that is not the reporter the record
// names is refused like any unauthenticated result.
func TestCheckResultsFromARelay(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.RequireAuthenticatedObservers = true
	cfg.Checks.Enabled = true
	e, tt, _ := checkTestExporterWithTelemetry(t, cfg)
	var written v1alpha1.NetworkCheckStatus
	pnh := e.writer.Client().(*fake.Clientset)
	pnh.PrependReactor("patch", "networkchecks", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" {
			var ops []struct {
				Value v1alpha1.NetworkCheckStatus `json:"value"`
			}
			require.NoError(t, json.Unmarshal(a.(clienttesting.PatchAction).GetPatch(), &ops))
			written = ops[0].Value
		}
		return true, &v1alpha1.NetworkCheck{}, nil
	})
	startChecks(t, e, kubefake.NewSimpleClientset(runningPod("shop", "web-0", "node-a", "10.0.0.1")), placedCheck("shop", "web-to-db"))
	relayID := identity.Identity{Namespace: "netpulse", ServiceAccount: "netpulse-gateway", PodName: "gw-1", PodUID: "uid-gw", Role: identity.RoleRelay}
	now := time.Now()
	other := agentA
	other.PodName, other.PodUID = "agent-b", "uid-b"
	forged := relay.StampLogs(checkResult(v1alpha1.NetworkCheckKind, "shop", "web-to-db", "netpulse", "agent-a", "uid-a", "node-a", now, false), other)
	require.NoError(t, e.consumeLogs(viaAuth(relayID), forged))
	relayed := relay.StampLogs(checkResult(v1alpha1.NetworkCheckKind, "shop", "web-to-db", "netpulse", "agent-a", "uid-a", "node-a", now.Add(time.Second), true), agentA)
	require.NoError(t, e.consumeLogs(viaAuth(relayID), relayed))
	assert.Equal(t, map[string]int64{checks.SkipCheckUnauthentic: 1}, skippedByReason(t, tt), "the forged one")
	e.checks.Reconcile(context.Background(), now.Add(2*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	e.writer.Run(ctx, 1)
	require.Eventually(t, func() bool { return e.writer.PendingCount() == 0 }, 5*time.Second, 5*time.Millisecond)
	cancel()
	assert.Len(t, written.Successes, 1, "the relayed result, folded in as the agent's")
	assert.Empty(t, written.Failures)
}
