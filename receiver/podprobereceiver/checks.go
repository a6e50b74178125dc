// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package podprobereceiver

import (
	"context"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"
	"k8s.io/client-go/dynamic"

	"github.com/netpulse/netpulse/internal/contract"
	"github.com/netpulse/netpulse/receiver/podprobereceiver/internal/checks"
)

// startChecks starts the runner of the declared checks placed on this collector. Without a
// logs pipeline the results have nowhere to go: the runner does not start (and says so).
func (r *podProbeReceiver) startChecks() error {
	if r.logsConsumer == nil {
		r.set.Logger.Warn("checks.enabled but pod_probe is in no logs pipeline: declared checks are not run")
		return nil
	}
	restCfg, err := r.cfg.RESTConfig("netpulse-pod-probe-checks")
	if err != nil {
		return err
	}
	client, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	cfg := checks.Config{
		Vantage:   r.cfg.Checks.Vantage,
		Node:      r.cfg.Source.NodeName,
		Pod:       r.cfg.Source.PodName,
		Namespace: r.cfg.Source.Namespace,
		OpenShift: r.cfg.Checks.OpenShift,
		MaxChecks: r.cfg.Checks.MaxChecks,
		Policy:    r.policy,
	}
	r.checks = checks.New(cfg, client, r.set.Logger, r.emitCheckResult)
	r.checks.Start()
	r.set.Logger.Info("running declared checks", zap.Stringer("checks", cfg))
	return nil
}

// emitCheckResult sends one run as a log record: the reporter (this pod) on the Resource as
// for metrics, the run on the record (internal/contract, CheckResultEvent).
func (r *podProbeReceiver) emitCheckResult(res checks.Result) {
	logs := plog.NewLogs()
	rl := logs.ResourceLogs().AppendEmpty()
	// The same Resource as the metrics: the reporter's identity.
	r.emitter.res.CopyTo(rl.Resource())
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName(contract.ProbeScopeName)
	lr := sl.LogRecords().AppendEmpty()
	lr.SetEventName(contract.CheckResultEvent)
	lr.SetTimestamp(pcommon.NewTimestampFromTime(res.Start))
	lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(res.Start.Add(res.Latency)))
	if res.Success {
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
	} else {
		lr.SetSeverityNumber(plog.SeverityNumberWarn)
	}
	lr.Body().SetStr(res.Message)
	a := lr.Attributes()
	a.PutStr(contract.CheckKind, res.Kind)
	a.PutStr(contract.CheckNamespace, res.Namespace)
	a.PutStr(contract.CheckName, res.Name)
	a.PutStr(contract.CheckUID, string(res.UID))
	a.PutBool(contract.CheckSuccess, res.Success)
	a.PutStr(contract.CheckReason, res.Reason)
	a.PutDouble(contract.CheckLatency, res.Latency.Seconds())
	a.PutStr(contract.CheckEndpoint, res.Endpoint)
	a.PutStr(contract.ProbeType, res.Probe)
	if res.Address.IsValid() {
		a.PutStr(contract.DestinationAddress, res.Address.String())
	}
	if res.Port > 0 {
		a.PutInt(contract.DestinationPort, int64(res.Port))
	}
	if res.Local.IsValid() && !res.Local.IsUnspecified() {
		a.PutStr(contract.SourceAddress, res.Local.String())
	}
	if err := r.logsConsumer.ConsumeLogs(context.Background(), logs); err != nil {
		r.set.Logger.Debug("check result not delivered", zap.String("check", res.Key()), zap.Error(err))
	}
}
