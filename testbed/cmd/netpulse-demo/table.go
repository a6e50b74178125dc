// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/netpulse/netpulse/api/v1alpha1"
)

// output writes the story. On a terminal the live table is redrawn in place; otherwise
// (make demo | tee, CI) a table is printed only when the verdicts change, plus a one-line
// summary at every refresh, so a log reads as a story too.
type output struct {
	mu        sync.Mutex
	w         io.Writer
	tty       bool
	liveLines int    // lines of the live block currently on screen (tty)
	liveText  string // the live block, redrawn after other lines (tty)
	lastKey   string // verdicts of the last table printed (not tty)
}

func newOutput(f *os.File) *output {
	o := &output{w: f}
	if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb" {
		o.tty = true
	}
	return o
}

// println prints a line of the story above the live table.
func (o *output) println(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.clearLive()
	fmt.Fprintln(o.w, s)
	if o.tty && o.liveText != "" {
		// The table stays below the story.
		fmt.Fprint(o.w, o.liveText)
		o.liveLines = strings.Count(o.liveText, "\n")
	}
}

// live shows the table t.
func (o *output) live(t table) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.tty {
		o.clearLive()
		o.liveText = t.text
		fmt.Fprint(o.w, t.text)
		o.liveLines = strings.Count(t.text, "\n")
		return
	}
	if t.key != o.lastKey {
		o.lastKey = t.key
		fmt.Fprint(o.w, t.text)
		return
	}
	fmt.Fprintln(o.w, "    "+t.summary)
}

// freeze leaves the live table where it is: later lines go below it.
func (o *output) freeze() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.liveLines, o.liveText = 0, ""
}

func (o *output) clearLive() {
	if o.tty && o.liveLines > 0 {
		fmt.Fprintf(o.w, "\033[%dA\033[J", o.liveLines)
		o.liveLines = 0
	}
}

type table struct {
	text    string // the rendered block
	key     string // what changes it materially (verdicts, conditions)
	summary string // one line
}

// renderTable renders the PodNetworkHealth objects with the printer columns of the CRD
// (deploy/crds: what `kubectl get pnh -A` shows; NAME is left out for width, the PATH
// column says which nodes a pair joins) and the nodes' pod-network condition.
func renderTable(s *snapshot, elapsed time.Duration) table {
	var b strings.Builder
	var key strings.Builder
	counts := map[v1alpha1.Reachability]int{}
	fmt.Fprintf(&b, "\n  --- kubectl get pnh -A   (%s, t=%s) ---\n", s.at.Format("15:04:05"), round(elapsed))
	tw := tabwriter.NewWriter(&b, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "  NAMESPACE\tSOURCE\tTARGET\tREACHABLE\tRTT P50\tLOSS\tSINCE\tAGE\tPATH")
	for i := range s.items {
		o := &s.items[i]
		target := ""
		if o.Spec.TargetPodRef != nil {
			target = o.Spec.TargetPodRef.Name
		}
		p50 := ""
		if o.Status.Latency != nil {
			p50 = string(o.Status.Latency.P50)
		}
		r := o.Status.Reachability
		counts[r]++
		var since *metav1.Time // what kubectl's SINCE column shows: the verdict's last transition
		if c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionReachable); c != nil {
			since = &c.LastTransitionTime
		}
		path := fmt.Sprintf("%s -> %s", orDash(s.podNode[o.Spec.SourcePodRef.Name]), orDash(s.targetNode(o)))
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			o.Namespace, o.Spec.SourcePodRef.Name, orNoValue(target), orNoValue(string(r)), orNoValue(p50),
			orNoValue(string(o.Status.LossRatio)), age(since, s.at), age(&o.CreationTimestamp, s.at), path)
		fmt.Fprintf(&key, "%s=%s;", o.Name, r)
	}
	if len(s.items) == 0 {
		fmt.Fprintln(tw, "  (no PodNetworkHealth objects yet)")
	}
	_ = tw.Flush()

	fmt.Fprintf(&b, "  --- nodes: condition %s ---\n", nodeConditionType)
	tw = tabwriter.NewWriter(&b, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "  NODE\tZONE\tSTATUS\tREASON\tSINCE\tMESSAGE")
	var marked []string
	for i := range s.nodes {
		n := &s.nodes[i]
		c := s.nodeCond(n.Name)
		st, reason, since, msg := "<none>", "", "", ""
		if c != nil {
			st, reason, msg = string(c.Status), c.Reason, c.Message
			since = age(&c.LastTransitionTime, s.at)
			if c.Status == "True" {
				marked = append(marked, n.Name)
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", n.Name, n.Labels["topology.kubernetes.io/zone"], st, reason, since, ellipsis(msg, 90))
		fmt.Fprintf(&key, "%s=%s;", n.Name, st)
	}
	_ = tw.Flush()

	sum := fmt.Sprintf("%s  %d objects (%d expected): %d Reachable, %d Unreachable, %d Unknown/empty; node condition True on: %s",
		s.at.Format("15:04:05"), len(s.items), s.expected, counts[v1alpha1.Reachable], counts[v1alpha1.Unreachable],
		len(s.items)-counts[v1alpha1.Reachable]-counts[v1alpha1.Unreachable], orNone(strings.Join(marked, ",")))
	if len(marked) == 0 {
		sum = strings.TrimSuffix(sum, "absent") + "none"
	}
	return table{text: b.String(), key: key.String(), summary: sum}
}

func age(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "<none>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func orNoValue(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func ellipsis(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
