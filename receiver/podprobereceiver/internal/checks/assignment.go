// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package checks runs declared checks (NetworkCheck and OpenShift's
// PodNetworkConnectivityCheck) from an agent or a sidecar: it watches only the checks the
// gateway placed on this vantage point (a label selector on its node or pod), runs each at
// its interval, and hands every run's result to the receiver, which emits it as a log
// record (internal/contract, CheckResultEvent).
//
// This file is the pure part: what a check object asks to run.
package checks

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	ocv1alpha1 "github.com/netpulse/netpulse/api/openshift/operatorcontrolplane/v1alpha1"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/contract"
)

// Check kinds.
const (
	KindNetworkCheck = v1alpha1.NetworkCheckKind
	KindPNCC         = ocv1alpha1.Kind
)

// Defaults and bounds of a run.
const (
	DefaultInterval = 60 * time.Second
	MinInterval     = 10 * time.Second
	DefaultTimeout  = 5 * time.Second
)

// Assignment is one check as this vantage point runs it.
type Assignment struct {
	Kind, Namespace, Name string
	UID                   types.UID
	// Probe is contract.ProbeTypeTCP, ProbeTypeHTTP or ProbeTypeICMP.
	Probe string
	// Endpoint is host:port (tcp), the URL (http) or the IP address (icmp).
	Endpoint string
	Interval time.Duration
	Timeout  time.Duration
}

// Key identifies a check across updates.
func (a Assignment) Key() string { return a.Kind + "/" + a.Namespace + "/" + a.Name }

// FromNetworkCheck is what a NetworkCheck asks to run. It is not runnable (an error) until
// the gateway has accepted it and resolved its target into status.target.
func FromNetworkCheck(nc *v1alpha1.NetworkCheck) (Assignment, error) {
	a := Assignment{Kind: KindNetworkCheck, Namespace: nc.Namespace, Name: nc.Name, UID: nc.UID,
		Interval: DefaultInterval, Timeout: DefaultTimeout}
	if c := meta.FindStatusCondition(nc.Status.Conditions, v1alpha1.ConditionAccepted); c == nil || c.Status != "True" {
		return a, fmt.Errorf("not accepted by the gateway yet")
	}
	if nc.Status.Target == nil || nc.Status.Target.Endpoint == "" {
		return a, fmt.Errorf("no resolved target in status")
	}
	a.Endpoint = nc.Status.Target.Endpoint
	a.Probe = string(nc.Spec.Probe)
	if a.Probe == "" {
		a.Probe = contract.ProbeTypeTCP
		if nc.Spec.Target.URL != "" {
			a.Probe = contract.ProbeTypeHTTP
		}
	}
	if nc.Spec.Interval != nil {
		a.Interval = nc.Spec.Interval.Duration
	}
	if nc.Spec.Timeout != nil {
		a.Timeout = nc.Spec.Timeout.Duration
	}
	return a, a.validate()
}

// PlacedHere reports (nil) whether the gateway placed nc on this vantage point, as it
// recorded in the status it writes through the status subresource (status.vantage), which
// namespace editors cannot write: the vantage labels a runner selects on are only a filter,
// since whoever may edit the check may edit them too.
func (c Config) PlacedHere(nc *v1alpha1.NetworkCheck) error {
	v := nc.Status.Vantage
	if v == nil {
		return fmt.Errorf("no vantage recorded by the gateway")
	}
	switch c.Vantage {
	case VantageSidecar:
		if v.Mode != v1alpha1.VantageSidecar || v.SourcePod != c.Pod || nc.Namespace != c.Namespace {
			return fmt.Errorf("placed by the gateway on %s %s/%s, not on this sidecar", v.Mode, nc.Namespace, v.SourcePod)
		}
	default:
		if v.Mode != v1alpha1.VantageAgent || v.Node != c.Node {
			return fmt.Errorf("placed by the gateway on %s of node %q, not on this agent", v.Mode, v.Node)
		}
	}
	return nil
}

// FromPNCC is what a PodNetworkConnectivityCheck asks to run: a TCP connect to its
// targetEndpoint (after a DNS lookup for a name), every 60s or the interval of its
// netpulse.io/check-interval annotation.
func FromPNCC(c *ocv1alpha1.PodNetworkConnectivityCheck) (Assignment, error) {
	a := Assignment{Kind: KindPNCC, Namespace: c.Namespace, Name: c.Name, UID: c.UID,
		Probe: contract.ProbeTypeTCP, Endpoint: c.Spec.TargetEndpoint, Interval: DefaultInterval, Timeout: DefaultTimeout}
	if v, ok := c.Annotations[v1alpha1.AnnotationCheckInterval]; ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			return a, fmt.Errorf("annotation %s: %w", v1alpha1.AnnotationCheckInterval, err)
		}
		a.Interval = d
	}
	return a, a.validate()
}

func (a *Assignment) validate() error {
	if a.Interval < MinInterval {
		return fmt.Errorf("interval %s below %s", a.Interval, MinInterval)
	}
	if a.Timeout <= 0 || a.Timeout >= a.Interval {
		return fmt.Errorf("timeout %s must be positive and below the interval %s", a.Timeout, a.Interval)
	}
	switch a.Probe {
	case contract.ProbeTypeTCP:
		host, port, err := net.SplitHostPort(a.Endpoint)
		if err != nil || host == "" {
			return fmt.Errorf("endpoint %q: want host:port", a.Endpoint)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return fmt.Errorf("endpoint %q: invalid port", a.Endpoint)
		}
	case contract.ProbeTypeHTTP:
		u, err := url.Parse(a.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return fmt.Errorf("endpoint %q: want an http(s) URL without user information", a.Endpoint)
		}
	case contract.ProbeTypeICMP:
		if _, err := netip.ParseAddr(a.Endpoint); err != nil {
			return fmt.Errorf("endpoint %q: icmp needs an IP address", a.Endpoint)
		}
	default:
		return fmt.Errorf("probe %q not supported by checks", a.Probe)
	}
	return nil
}
