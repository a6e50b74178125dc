/*
Copyright The netpulse Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/netpulse/netpulse/internal/contract"
)

// Bounds of the API (the CRD enforces them; the exporter must stay within them).
const (
	// MaxOutages is the length of the outage history.
	MaxOutages = 20
	// MaxProbeTypes is the number of probe types (one result each): the contract's.
	MaxProbeTypes = len(contract.ProbeTypes)
	// MaxConditions is the number of conditions an object may carry.
	MaxConditions = 4
	// MaxReasonLength bounds machine-readable reasons (failures, outages, conditions).
	MaxReasonLength = 64
	// MaxMessageLength bounds human-readable messages (failures, outages, conditions).
	MaxMessageLength = 256
	// MaxDurationLength bounds a Duration string.
	MaxDurationLength = 32
)

// Condition types.
const (
	// ConditionReachable is True when the target answered probes within the observation
	// window, False when every probe failed, Unknown when there is nothing to judge by.
	ConditionReachable = "Reachable"
	// ConditionDegraded is True when the target is reachable but not well: one address
	// family fails while another answers (AddressFamilyUnreachable), a path-MTU black hole
	// (MTUBlackHole), or judged packet loss or latency (PacketLoss, HighLatency).
	ConditionDegraded = "Degraded"
)

// Reasons of the Reachable condition.
const (
	// ReasonProbesSucceeded (Reachable=True): probes succeeded within the window.
	ReasonProbesSucceeded = "ProbesSucceeded"
	// ReasonProbesFailed (Reachable=False): every probe within the window failed.
	ReasonProbesFailed = "ProbesFailed"
	// ReasonNoRecentObservations (Reachable=Unknown): no observation within the window
	// (none yet, or the observer stopped reporting).
	ReasonNoRecentObservations = "NoRecentObservations"
	// ReasonObserverUnhealthy (Reachable=Unknown): the failures are attributed to the
	// observer, not the target (the observer fails against most of its targets while other
	// observers reach this one).
	ReasonObserverUnhealthy = "ObserverUnhealthy"
	// ReasonObserverSilent (Reachable=Unknown): the observing agent stopped reporting (its
	// pod may still be Ready): the last figures are kept, but nothing says the path still
	// works or still fails.
	ReasonObserverSilent = "ObserverSilent"
	// Reachable=Unknown with a disruption as the reason: the pair fails towards a target the
	// cluster reported going away or down before it failed, so nothing is blamed on the
	// network (no node condition, no Event, no alert): the target pod is terminating or
	// deleted, its node is cordoned (a drain), its node's Ready condition is not True, or
	// the pod has not started (Pending).
	// These are the contract's disruptions (contract.Disruptions), the same words.
	ReasonPodTerminating = contract.DisruptionPodTerminating
	ReasonNodeDraining   = contract.DisruptionNodeDraining
	ReasonNodeNotReady   = contract.DisruptionNodeNotReady
	ReasonNotReady       = contract.DisruptionNotReady
)

// Reasons of the Degraded condition.
const (
	// ReasonWithinThresholds (Degraded=False): every probed address family answers, no
	// path-MTU black hole, and neither packet loss nor latency is judged.
	ReasonWithinThresholds = "WithinThresholds"
	// ReasonAddressFamiliesReachable (Degraded=False): what writers before the gray
	// judgement wrote instead of WithinThresholds; read as the same.
	ReasonAddressFamiliesReachable = "AddressFamiliesReachable"
	// ReasonAddressFamilyUnreachable (Degraded=True): one address family (e.g. IPv6) fails
	// for failures_to_unreachable rounds (more when the other family's own losses could
	// explain such a run: random loss is not a family failure), or is judged unreachable by
	// the target's observers, while another answers; the message names it.
	ReasonAddressFamilyUnreachable = "AddressFamilyUnreachable"
	// ReasonMTUBlackHole (Degraded=True): the last two path-MTU probes (pod_probe's
	// icmp.path_mtu) found full-size don't-fragment packets vanishing without an ICMP error
	// while small ones pass: a hop with a smaller MTU drops them (a path-MTU black hole).
	// The message names the size known to pass.
	ReasonMTUBlackHole = "MTUBlackHole"
	// ReasonPacketLoss (Degraded=True): the gateway judges echoes lost above the cluster's
	// background with the configured evidence (a likelihood-ratio test over a recent
	// window of answered rounds) at the target's node (most of its observers see it), at the
	// observer's own node (it sees it towards most of its targets) or on this path alone;
	// the message gives the loss with its 95 % interval, its echoes and window, and the side.
	ReasonPacketLoss = "PacketLoss"
	// ReasonHighLatency (Degraded=True): most observer nodes' newest round towards the
	// target's node is above its learnt baseline by the relative and absolute margins for
	// several rounds (or above the absolute bound), or the observer's own node is slow
	// towards most of its targets; the message gives the RTT against the baseline.
	ReasonHighLatency = "HighLatency"
	// ReasonNotReachable (Degraded=Unknown): degradation is not judged while not reachable.
	ReasonNotReachable = "NotReachable"
)

// Failure reasons for ProbeFailure.Reason and Outage.Reason. Writers may use other
// CamelCase reasons; these are the common ones.
const (
	FailureReasonTimeout            = "Timeout"
	FailureReasonConnectionRefused  = "ConnectionRefused"
	FailureReasonConnectionReset    = "ConnectionReset"
	FailureReasonHostUnreachable    = "HostUnreachable"
	FailureReasonNetworkUnreachable = "NetworkUnreachable"
	FailureReasonDNSError           = "DNSError"
	FailureReasonHTTPStatus         = "HTTPStatus"
	FailureReasonTLSError           = "TLSError"
	FailureReasonError              = "Error"
)

// Duration is a non-negative length of time as a string that time.ParseDuration reads,
// written with the units h, m, s, ms, us and ns: "850us", "1.25ms", "2s", "1m30s". It is a
// string (Kubernetes APIs avoid floats) and reads well in printer columns. At most four
// number+unit groups of at most five integer digits: the value always parses and never
// overflows. Use DurationOf to write one and Duration.Duration to read one.
//
// +kubebuilder:validation:MaxLength=32
// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]{1,9})?(h|m|s|ms|us|ns)){1,4}$`
type Duration string

// DurationOf formats d compactly: one unit with at most three decimals below a minute
// ("850us", "1.25ms", "12.5s"), Go's h/m/s form above ("1m30s", "2h0m0s"). The relative
// rounding error is below 0.05%. Negative durations are clamped to zero; durations that do
// not fit five digits of hours are clamped to 99999h.
func DurationOf(d time.Duration) Duration {
	const maxHours = 99999 * time.Hour
	switch {
	case d <= 0:
		return "0s"
	case d >= maxHours:
		return "99999h"
	case d < time.Microsecond:
		return Duration(strconv.FormatInt(int64(d), 10) + "ns")
	case d < time.Millisecond:
		return Duration(formatUnit(d, time.Microsecond, "us"))
	case d < time.Second:
		return Duration(formatUnit(d, time.Millisecond, "ms"))
	case d < time.Minute:
		return Duration(formatUnit(d, time.Second, "s"))
	default:
		// Go's String for d >= 1m uses only h, m and s; keep at most millisecond precision.
		return Duration(d.Round(time.Millisecond).String())
	}
}

// formatUnit formats d in unit with at most three decimals, trailing zeros trimmed.
func formatUnit(d, unit time.Duration, suffix string) string {
	// Round to a thousandth of the unit first, so that 999.9996us becomes "1000us" rather
	// than "999.1000us"-style artefacts.
	milli := (int64(d)*1000 + int64(unit)/2) / int64(unit) // value in thousandths of unit
	s := strconv.FormatInt(milli/1000, 10)
	if frac := milli % 1000; frac != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%03d", frac), "0")
	}
	return s + suffix
}

// Duration parses d. An empty Duration is zero.
func (d Duration) Duration() (time.Duration, error) {
	if d == "" {
		return 0, nil
	}
	v, err := time.ParseDuration(string(d))
	if err != nil {
		return 0, err
	}
	if v < 0 {
		return 0, fmt.Errorf("negative duration %q", string(d))
	}
	return v, nil
}

// String returns d as a string.
func (d Duration) String() string { return string(d) }

// Ratio is a ratio from 0 to 1 as a decimal string with at most six decimals: "0", "0.2",
// "0.0125", "1". It is exact (no floating point in the API), has a resolution of one part
// per million, uses the same unit as the loss ratio in the telemetry, and reads well in a
// printer column. Use RatioOf to write one and Ratio.Float64 to read one.
//
// +kubebuilder:validation:MaxLength=8
// +kubebuilder:validation:Pattern=`^(0(\.[0-9]{1,6})?|1(\.0{1,6})?)$`
type Ratio string

// RatioOf returns part/whole rounded to six decimals ("0" when whole <= 0). Any non-zero
// loss stays visible: 0 < part < whole never rounds to "0" or "1" (it is clamped to
// 0.000001 and 0.999999).
func RatioOf(part, whole int64) Ratio {
	if whole <= 0 || part <= 0 {
		return "0"
	}
	if part >= whole {
		return "1"
	}
	// ppm = round(part * 1e6 / whole) without overflow: 128-bit product.
	hi, lo := bits.Mul64(uint64(part), 1_000_000)
	lo, carry := bits.Add64(lo, uint64(whole)/2, 0)
	hi += carry
	ppm, _ := bits.Div64(hi, lo, uint64(whole)) // hi < whole because part < whole
	switch {
	case ppm == 0:
		ppm = 1
	case ppm >= 1_000_000:
		ppm = 999_999
	}
	return ratioFromPPM(ppm)
}

// RatioFromFloat returns f (clamped to [0, 1]; NaN is 0) rounded to six decimals.
func RatioFromFloat(f float64) Ratio {
	switch {
	case math.IsNaN(f) || f <= 0:
		return "0"
	case f >= 1:
		return "1"
	}
	return ratioFromPPM(uint64(math.Round(f * 1e6)))
}

func ratioFromPPM(ppm uint64) Ratio {
	if ppm >= 1_000_000 {
		return "1"
	}
	if ppm == 0 {
		return "0"
	}
	return Ratio(strings.TrimRight(fmt.Sprintf("0.%06d", ppm), "0"))
}

// Float64 parses r. An empty Ratio is zero.
func (r Ratio) Float64() (float64, error) {
	if r == "" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(string(r), 64)
	if err != nil {
		return 0, err
	}
	if f < 0 || f > 1 || math.IsNaN(f) {
		return 0, fmt.Errorf("ratio %q out of range [0, 1]", string(r))
	}
	return f, nil
}

// String returns r as a string.
func (r Ratio) String() string { return string(r) }

// NewLatencySummary builds a LatencySummary from quantile estimates, forcing the order the
// API requires (p50 <= p90 <= p99 <= max): interpolated quantiles can exceed the exact
// maximum, so each value is raised to the one before it and max to the largest.
func NewLatencySummary(p50, p90, p99, maxRTT time.Duration) *LatencySummary {
	p90 = max(p90, p50)
	p99 = max(p99, p90)
	maxRTT = max(maxRTT, p99)
	return &LatencySummary{P50: DurationOf(p50), P90: DurationOf(p90), P99: DurationOf(p99), Max: DurationOf(maxRTT)}
}

// TruncateMessage shortens s to at most maxChars characters (runes), ending with "..." when
// it had to cut. Use it for messages (MaxMessageLength) and other bounded free text: the
// API server counts characters, not bytes.
func TruncateMessage(s string, maxChars int) string {
	if maxChars <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= maxChars {
		return s
	}
	keep, ellipsis := maxChars-3, "..."
	if keep < 0 {
		keep, ellipsis = maxChars, ""
	}
	n := 0
	for i := range s {
		if n == keep {
			return s[:i] + ellipsis
		}
		n++
	}
	return s + ellipsis // unreachable: s has more than maxChars runes
}
