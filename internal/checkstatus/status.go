// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package checkstatus

import (
	"time"
	"unicode/utf8"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/contract"
)

// Limits of a Status, those of OpenShift's PodNetworkConnectivityCheck status, and of the
// free text in it (those of a Kubernetes condition).
const (
	// MaxLogEntries is the length of each of Successes and Failures.
	MaxLogEntries = 10
	// MaxOutages is the length of the outage history.
	MaxOutages = 20
	// MaxOutageLogs is the length of each of an outage's StartLogs and EndLogs.
	MaxOutageLogs = 5
	// MaxMessageLength is the longest message, in characters.
	MaxMessageLength = 256
	// MaxReasonLength is the longest reason, in characters.
	MaxReasonLength = 64
)

// Check intervals.
const (
	// DefaultInterval is how often a check runs unless declared otherwise.
	DefaultInterval = 60 * time.Second
	// MinInterval is the shortest interval a check may declare.
	MinInterval = 10 * time.Second
)

// Reasons of a log Entry. The first four are OpenShift's; the others are netpulse's own.
const (
	ReasonDNSResolve      = "DNSResolve"      // the target's name resolved
	ReasonDNSError        = "DNSError"        // the target's name did not resolve
	ReasonTCPConnect      = "TCPConnect"      // a TCP connection was established
	ReasonTCPConnectError = "TCPConnectError" // a TCP connection failed
	ReasonHTTPRequest     = "HTTPRequest"     // an HTTP request got an acceptable answer
	ReasonHTTPError       = "HTTPError"       // an HTTP request failed or got an unacceptable answer
	ReasonICMPEcho        = "ICMPEcho"        // an ICMP echo was answered
	ReasonICMPError       = "ICMPError"       // no ICMP echo was answered
	ReasonTargetRefused   = "TargetRefused"   // the target policy refused the address: nothing was sent
)

// The Reachable condition.
const (
	// ConditionReachable is the type of the condition a Status carries.
	ConditionReachable = "Reachable"

	ConditionTrue    = "True"
	ConditionFalse   = "False"
	ConditionUnknown = "Unknown"

	// ReasonTCPConnectSuccess is the True reason of FlavourOpenShift.
	ReasonTCPConnectSuccess = "TCPConnectSuccess"
	// ReasonProbeSucceeded is the True reason of FlavourNetpulse.
	ReasonProbeSucceeded = "ProbeSucceeded"
	// ReasonProbeFailed is FlavourNetpulse's False reason for a failure without a reason.
	ReasonProbeFailed = "ProbeFailed"
	// ReasonNoResults is the Unknown reason: no result arrived for a while (Silence).
	ReasonNoResults = "NoResults"
	// ReasonNetworkPolicyDenied is FlavourNetpulse's False reason when the gateway's
	// NetworkPolicy index denies the failing check's path (the gateway sets it, never a
	// result: contract.GatewayCheckReasons).
	ReasonNetworkPolicyDenied = contract.CheckReasonNetworkPolicyDenied
)

// Events.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"

	// EventOutageDetected is the reason of the Warning event of an outage's start.
	EventOutageDetected = v1alpha1.EventOutageDetected
	// EventRestored is the reason of the Normal event of an outage's end.
	EventRestored = v1alpha1.EventRestored
)

// Entry is one result of a check: a log entry of Successes, Failures and an outage's logs.
type Entry struct {
	// Time is when the check ran.
	Time time.Time
	// Success says whether it succeeded.
	Success bool
	// Reason is a machine-readable CamelCase cause (the Reason* constants).
	Reason string
	// Message describes the result for humans.
	Message string
	// Latency is how long the check took.
	Latency time.Duration
}

// Outage is one period during which the check failed.
type Outage struct {
	// Start is the time of the failure that started the outage.
	Start time.Time
	// End is the time of the success that ended it; zero while it is ongoing.
	End time.Time
	// StartLogs are the failure that started the outage and the failures whose reason
	// changed after it, newest first, at most MaxOutageLogs (the first ones kept).
	StartLogs []Entry
	// EndLogs are the success that ended the outage and the outage's last failures before
	// it, newest first, at most MaxOutageLogs.
	EndLogs []Entry
	// Message summarises the outage.
	Message string
}

// Ongoing reports whether the outage has not ended.
func (o Outage) Ongoing() bool { return o.End.IsZero() }

// Condition is the Reachable condition.
type Condition struct {
	// Status is ConditionTrue, ConditionFalse or ConditionUnknown; empty before the first
	// result.
	Status string
	// Reason is a machine-readable CamelCase cause (see ConditionReason).
	Reason string
	// Message describes the condition for humans.
	Message string
	// LastTransitionTime is when Status last changed.
	LastTransitionTime time.Time
}

// Event is a Kubernetes event to emit about the check.
type Event struct {
	// Type is EventNormal or EventWarning.
	Type string
	// Reason is EventOutageDetected or EventRestored.
	Reason string
	// Message describes the event for humans.
	Message string
	// Time is the time of the result that caused the event.
	Time time.Time
}

// Status is the status of one check.
type Status struct {
	// Successes are the last successes, newest first, at most MaxLogEntries.
	Successes []Entry
	// Failures are the last failures, newest first, at most MaxLogEntries.
	Failures []Entry
	// Outages is the outage history, newest first, at most MaxOutages; only the newest may
	// be ongoing.
	Outages []Outage
	// Reachable is the condition.
	Reachable Condition
	// LastResultTime is the time of the newest result applied; zero before the first.
	LastResultTime time.Time
}

// DeepCopy returns a copy of s that shares no memory with it. All the log entries of the
// copy live in one allocation; each slice's capacity is its length, so appending to one
// never overwrites another.
func (s Status) DeepCopy() Status {
	n := len(s.Successes) + len(s.Failures)
	for _, o := range s.Outages {
		n += len(o.StartLogs) + len(o.EndLogs)
	}
	buf := make([]Entry, 0, n)
	take := func(src []Entry) []Entry {
		if src == nil {
			return nil
		}
		i := len(buf)
		buf = append(buf, src...)
		return buf[i:len(buf):len(buf)]
	}
	out := s
	out.Successes = take(s.Successes)
	out.Failures = take(s.Failures)
	if s.Outages != nil {
		out.Outages = make([]Outage, len(s.Outages))
		for i, o := range s.Outages {
			o.StartLogs = take(o.StartLogs)
			o.EndLogs = take(o.EndLogs)
			out.Outages[i] = o
		}
	}
	return out
}

// Equal reports whether a and b hold the same status (times compared with time.Equal).
func (s Status) Equal(b Status) bool {
	if !s.LastResultTime.Equal(b.LastResultTime) || !s.Reachable.equal(b.Reachable) ||
		!entriesEqual(s.Successes, b.Successes) || !entriesEqual(s.Failures, b.Failures) ||
		len(s.Outages) != len(b.Outages) {
		return false
	}
	for i := range s.Outages {
		x, y := &s.Outages[i], &b.Outages[i]
		if !x.Start.Equal(y.Start) || !x.End.Equal(y.End) || x.Message != y.Message ||
			!entriesEqual(x.StartLogs, y.StartLogs) || !entriesEqual(x.EndLogs, y.EndLogs) {
			return false
		}
	}
	return true
}

func (c Condition) equal(d Condition) bool {
	return c.Status == d.Status && c.Reason == d.Reason && c.Message == d.Message &&
		c.LastTransitionTime.Equal(d.LastTransitionTime)
}

func (e Entry) equal(f Entry) bool {
	return e.Time.Equal(f.Time) && e.Success == f.Success && e.Reason == f.Reason &&
		e.Message == f.Message && e.Latency == f.Latency
}

func entriesEqual(a, b []Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].equal(b[i]) {
			return false
		}
	}
	return true
}

// Truncate shortens s to at most maxChars characters (runes), never cutting a multi-byte
// character; when it cuts and there is room it ends with "...". Messages are cut to
// MaxMessageLength; reasons (CamelCase identifiers, no ellipsis) with truncateReason.
func Truncate(s string, maxChars int) string {
	if maxChars <= 0 {
		return ""
	}
	if len(s) <= maxChars || utf8.RuneCountInString(s) <= maxChars {
		return s
	}
	keep, ellipsis := maxChars-3, "..."
	if keep <= 0 {
		keep, ellipsis = maxChars, ""
	}
	return cutRunes(s, keep) + ellipsis
}

// truncateReason cuts a reason to MaxReasonLength characters, without an ellipsis (a
// reason must stay an identifier).
func truncateReason(s string) string {
	if len(s) <= MaxReasonLength {
		return s
	}
	return cutRunes(s, MaxReasonLength)
}

// cutRunes returns the first n runes of s (all of s if it has fewer).
func cutRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// ValidReason reports whether s may be a reason as a sender reports it: empty, or at most
// MaxReasonLength characters matching the pattern the API enforces on a condition's
// reason (^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$), since a failure's reason becomes the
// Reachable condition's. Anything else would make every status write of the check fail
// with 422, so the gateway refuses the result instead (docs/security.md).
func ValidReason(s string) bool {
	if s == "" {
		return true
	}
	if len(s) > MaxReasonLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
		switch {
		case i == 0 && !letter:
			return false
		case letter, c >= '0' && c <= '9', c == '_':
		case (c == ',' || c == ':') && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}
