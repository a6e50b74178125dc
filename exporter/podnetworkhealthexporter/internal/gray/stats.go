// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package gray judges gray failures: packet loss and latency that are not outages. It is
// pure (no I/O, the clock is passed in) and small on purpose: windows of echo counts in
// time slots, a likelihood-ratio test of the loss rate against the cluster's background,
// confidence bounds for clearing, and a latency baseline. The verdict stage keeps one
// Loss judge per target and per observer node, and localises by leaving out the largest
// contributor (docs: exporter/podnetworkhealthexporter/docs/gray.md).
package gray // import "github.com/netpulse/netpulse/exporter/podnetworkhealthexporter/internal/gray"

import "math"

// KL is the Kullback-Leibler divergence of Bernoulli(p) from Bernoulli(q), in nats: the
// evidence one sample brings, on average, that the rate is p and not q.
func KL(p, q float64) float64 {
	p = clamp01(p)
	q = min(max(q, 1e-12), 1-1e-12)
	d := 0.0
	if p > 0 {
		d += p * math.Log(p/q)
	}
	if p < 1 {
		d += (1 - p) * math.Log((1-p)/(1-q))
	}
	return d
}

func clamp01(p float64) float64 { return min(max(p, 0), 1) }

// LLR is the generalised log-likelihood ratio of lost of sent echoes against a background
// loss rate p0: sent·KL(lost/sent ‖ p0) when the estimate is above p0, else 0. Above h it
// says, with false-alarm odds of about e^-h per test, that the rate is not the background.
func LLR(lost, sent uint64, p0 float64) float64 {
	if sent == 0 {
		return 0
	}
	p := float64(min(lost, sent)) / float64(sent)
	if p <= p0 {
		return 0
	}
	return float64(sent) * KL(p, p0)
}

// WilsonUpper is the upper Wilson score bound of the loss rate lost/sent at z standard
// deviations (1 without samples).
func WilsonUpper(lost, sent uint64, z float64) float64 {
	lo, hi := wilson(lost, sent, z)
	_ = lo
	return hi
}

// WilsonLower is the lower Wilson score bound (0 without samples).
func WilsonLower(lost, sent uint64, z float64) float64 {
	lo, _ := wilson(lost, sent, z)
	return lo
}

func wilson(lost, sent uint64, z float64) (lo, hi float64) {
	if sent == 0 {
		return 0, 1
	}
	n := float64(sent)
	p := float64(min(lost, sent)) / n
	z2 := z * z
	den := 1 + z2/n
	c := p + z2/(2*n)
	r := z * math.Sqrt(p*(1-p)/n+z2/(4*n*n))
	return clamp01((c - r) / den), clamp01((c + r) / den)
}

// SamplesToDetect is the statistical bound: the fewest echoes from which any sequential
// test can tell a loss rate p from the background p0 with false-alarm odds e^-h, h/KL(p‖p0)
// (Wald's and Lorden's bound on the expected detection delay; +Inf when p <= p0).
func SamplesToDetect(p, p0, h float64) float64 {
	if p <= p0 {
		return math.Inf(1)
	}
	return h / KL(p, p0)
}

// UnconditionalLoss recovers the echo loss rate q from the share c of echoes lost in the
// rounds that were answered (at least one of e echoes came back): those rounds hide the
// rounds random loss emptied, so c = (q - q^e)/(1 - q^e) is below q (0.57 for q = 0.75 and
// e = 3). Gray judgement counts only answered rounds (a round without any answer is an
// outage's evidence, judged by reachability), and this undoes the bias.
func UnconditionalLoss(c, e float64) float64 {
	if c <= 0 || e <= 1 {
		return clamp01(c)
	}
	lo, hi := c, 1.0
	for range 40 {
		q := (lo + hi) / 2
		qe := math.Pow(q, e)
		if (q-qe)/(1-qe) < c {
			lo = q
		} else {
			hi = q
		}
	}
	return (lo + hi) / 2
}

// RunLength is how many failed rounds random loss at rate q (rounds of e echoes, each
// failing with probability q^e) makes together with probability below 1e-8: what a run of
// failures must reach before it is an outage rather than loss (at least 0, at most 64).
// 1e-8 rather than a looser bound because the run is tested every round across the
// target's observers: in the ring tests 1e-4 flipped a 75 %-lossy target about once an
// hour, 1e-6 once in 1,200 rounds.
func RunLength(q, e float64) int {
	if q <= 0 {
		return 0
	}
	f := math.Pow(q, max(e, 1))
	if f <= 0 {
		return 0
	}
	if f >= 0.9 {
		return 64
	}
	return min(int(math.Ceil(math.Log(1e-8)/math.Log(f))), 64)
}

// RunLossUpper is the loss rate a run bound should assume from lost of sent echoes of
// answered rounds of e echoes: the 2-sigma Wilson upper bound of their share, unbiased
// (UnconditionalLoss), and 0 below 3 lost echoes or 12 sent. An upper bound, because
// underestimating the loss of a lossy target makes its random runs read as outages; a
// modest one with a floor of evidence, because a single lost echo in a small sample would
// otherwise hold a real outage back for dozens of rounds (the CI mesh's partition of a node
// that had lost one echo read Reachable for 30 s).
func RunLossUpper(lost, sent uint64, e float64) float64 {
	if sent < 12 || lost < 3 {
		return 0
	}
	return UnconditionalLoss(WilsonUpper(lost, sent, 2), e)
}
