// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package observation

import "time"

// Verdict is a pair's reachability; the values are those of the PodNetworkHealth API.
type Verdict string

// Verdicts.
const (
	VerdictUnknown     Verdict = "Unknown"
	VerdictReachable   Verdict = "Reachable"
	VerdictUnreachable Verdict = "Unreachable"
)

// Latency summarises RTT samples. Count is 0 when there were none (the durations are then
// zero). Always P50 <= P90 <= P99 <= Max.
type Latency struct {
	Count              uint64
	P50, P90, P99, Max time.Duration
}

// Failure is one failed probe.
type Failure struct {
	Time time.Time
	// ErrorType is the contract's error.type ("" when unknown); Reason is its CamelCase
	// form for the API (FailureReason).
	ErrorType string
	Reason    string
	Message   string
}

// Outage is one period during which the pair was Unreachable.
type Outage struct {
	// Start is the time of the first failed round of the run that made the pair
	// Unreachable.
	Start time.Time
	// End is the time of the first successful round of the run that made it Reachable
	// again; zero while the outage is ongoing.
	End time.Time
	// Reason is the CamelCase failure reason of the first failed round.
	Reason  string
	Message string
	// Flaps: how often the pair recovered and failed again within the flap window; the
	// outage spans the whole flapping period.
	Flaps int
}

// Ongoing reports whether the outage has not ended.
func (o Outage) Ongoing() bool { return o.End.IsZero() }

// ProbeResult is what one probe type observed over the window.
type ProbeResult struct {
	Type string
	// Probes and Failures count this type's observations (one per round) in the window.
	Probes, Failures uint64
	// Sent and Lost: ICMP echoes when the echo counters are known, otherwise Probes and
	// Failures (a TCP connect, HTTP request or DNS lookup is one probe).
	Sent, Lost uint64
	// RTT of this type's successful probes in the window.
	RTT Latency
	// LastSuccess and LastFailure may lie before the window (zero / nil when never).
	LastSuccess time.Time
	LastFailure *Failure
}

// Summary is the state of one pair, everything the writer needs for its status.
type Summary struct {
	Key    PairKey
	Source Source // as of the newest observation
	Target Target

	Verdict Verdict
	// VerdictSince is the round that set the verdict (zero while Unknown).
	VerdictSince time.Time
	// ConsecutiveFailures / ConsecutiveSuccesses: the current run of rounds.
	ConsecutiveFailures, ConsecutiveSuccesses int

	// RTT is the primary latency over the window: ICMP RTTs when there are any, otherwise
	// the durations of the other probe types together. RTTFrom names the probe types it
	// comes from ("icmp", "tcp,http", ...).
	RTT     Latency
	RTTFrom string
	// LossRatio over the window: ICMP Lost/Sent echoes; without ICMP echoes, failed probes
	// of all types over probes. Valid when HasLoss.
	LossRatio  float64
	HasLoss    bool
	Sent, Lost uint64
	// AnsweredSent and AnsweredLost: the ICMP echoes of the rounds that were answered (at
	// least one reply): partial loss, what the gray judgement weighs (a round nothing
	// answered is an outage's evidence).
	AnsweredSent, AnsweredLost uint64

	// Probes holds one result per probe type seen, in the order icmp, tcp, http, dns.
	Probes []ProbeResult

	// Rounds and FailedRounds in the window.
	Rounds, FailedRounds int
	// LastObserved is the newest round; ObservedFromNode the source's node then.
	LastObserved     time.Time
	ObservedFromNode string
	// Observers: distinct (source pod UID, node) in the window; ObserverNodes their nodes,
	// sorted.
	Observers     int
	ObserverNodes []string

	// Outages, newest first, at most Config.MaxOutages; only the first may be ongoing.
	Outages []Outage

	// MTUBlackHole: the last two path-MTU probes both found full-size don't-fragment packets
	// vanishing while small ones passed; MTUPasses is the size known to pass, MTUSince
	// the first of those probes.
	MTUBlackHole bool
	MTUPasses    int
	MTUSince     time.Time

	// WindowStart and WindowEnd: the first and last round the window figures cover.
	WindowStart, WindowEnd time.Time
}

// Transition is a verdict change of one pair, for Events. When a pair changed several
// times between two Transitions calls, the changes are coalesced: Old is the verdict
// before the first, New the verdict after the last, At and Message those of the last, and
// Flips how many there were. A pair that flapped back (Old == New, Flips >= 2) is still
// reported, so the writer can say so; writers that only want real changes skip Old == New.
type Transition struct {
	Key      PairKey
	Old, New Verdict
	At       time.Time
	Flips    int
	Message  string
	// Flapping: the change to Unreachable reopened the previous outage, the first time
	// (the pair flaps; later flaps make no transition while recovery is damped).
	Flapping bool
}
