// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/matrix"
)

func (o *options) statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "each gateway writer's summary (NetworkHealthSummary), and whether its Lease says it is current",
		Long: `status lists the NetworkHealthSummary of every gateway writer (one per shard): the targets
it judges by verdict, the Unreachable and Degraded ones' nodes, the observers it hears, and
whether every verdict is written (COMPLETE). A summary is rewritten only on news, so its age
says nothing: it is CURRENT while the Lease it names is renewed by the writer that wrote it,
which status reads beside it (get on leases in the gateway's namespace).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rows, err := o.loadStatus(cmd.Context())
			if err != nil {
				return err
			}
			if len(rows) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "no NetworkHealthSummary%s: no gateway writer, or one older than it\n", o.inNamespace())
				return nil
			}
			writeStatus(cmd.OutOrStdout(), rows, o.now())
			return nil
		},
	}
}

// statusRow is one summary and the Lease it names (nil: none, or not readable).
type statusRow struct {
	summary  v1alpha1.NetworkHealthSummary
	lease    *coordinationv1.Lease
	leaseErr error
}

// loadStatus lists the summaries (-n, else every namespace) and reads each one's Lease.
func (o *options) loadStatus(ctx context.Context) ([]statusRow, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	nc, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	list, err := nc.NetpulseV1alpha1().NetworkHealthSummaries(o.namespace()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list NetworkHealthSummaries%s: %w", o.inNamespace(), err)
	}
	rows := make([]statusRow, 0, len(list.Items))
	for _, s := range list.Items {
		r := statusRow{summary: s}
		r.lease, r.leaseErr = kube.CoordinationV1().Leases(s.Namespace).Get(ctx, matrix.LeaseName(&s), metav1.GetOptions{})
		if r.leaseErr != nil {
			r.lease = nil
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b statusRow) int {
		return strings.Compare(a.summary.Namespace+"/"+a.summary.Name, b.summary.Namespace+"/"+b.summary.Name)
	})
	return rows, nil
}

// currency says whether a summary is current by its Lease: held by the writer that wrote
// it and renewed within the Lease's duration.
func currency(s *v1alpha1.NetworkHealthSummary, l *coordinationv1.Lease, leaseErr error, now time.Time) (bool, string) {
	switch {
	case apierrors.IsNotFound(leaseErr):
		return false, "no Lease " + s.Status.LeaseName + ": its writer stopped"
	case leaseErr == nil && l != nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" && *l.Spec.HolderIdentity != s.Status.Writer:
		return false, fmt.Sprintf("Lease held by %s, not by %s that wrote this: the new writer has not written it yet", *l.Spec.HolderIdentity, s.Status.Writer)
	}
	return matrix.LeaseCurrent(l, leaseErr, now)
}

// loadWriters is what the summaries and their Leases say of the objects' writers, by shard
// (matrix.Input.Writers). Summaries are listed in every namespace (the gateway's is not the
// objects'), else in the objects' namespace; a reader without the right to read them or a
// writer's Lease gets nil or no entry for it, and the objects' freshUntil decides.
func loadWriters(ctx context.Context, nc versioned.Interface, kube kubernetes.Interface, ns string, now time.Time) map[string]matrix.Writer {
	list, err := nc.NetpulseV1alpha1().NetworkHealthSummaries(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil && ns != metav1.NamespaceAll {
		list, err = nc.NetpulseV1alpha1().NetworkHealthSummaries(ns).List(ctx, metav1.ListOptions{})
	}
	if err != nil {
		return nil
	}
	summaries := make([]*v1alpha1.NetworkHealthSummary, len(list.Items))
	for i := range list.Items {
		summaries[i] = &list.Items[i]
	}
	return matrix.WritersFrom(summaries, func(namespace, name string) (*coordinationv1.Lease, error) {
		return kube.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	}, now)
}

// writeStatus prints one line per summary, then what is wrong, by writer.
func writeStatus(w io.Writer, rows []statusRow, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WRITER\tSHARD\tTARGETS\tUNREACHABLE\tDEGRADED\tUNKNOWN\tOBSERVERS\tCOMPLETE\tCURRENT")
	var notes []string
	for _, r := range rows {
		s := r.summary.Status
		complete := "Unknown"
		if c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionComplete); c != nil {
			complete = string(c.Status)
			if c.Status != metav1.ConditionTrue {
				complete += " (" + c.Reason + ")"
			}
		}
		ok, why := currency(&r.summary, r.lease, r.leaseErr, now)
		current := "yes"
		if !ok {
			current = "NO"
		}
		name := r.summary.Namespace + "/" + r.summary.Name
		fmt.Fprintf(tw, "%s\t%d/%d\t%d\t%d\t%d\t%d\t%d (%d silent)\t%s\t%s\n", name, s.Shard, max(s.Shards, 1), s.Targets,
			s.UnreachableTargets, s.DegradedTargets, s.UnknownTargets, s.Observers, s.SilentObservers, complete, current)
		notes = append(notes, fmt.Sprintf("%s: %s", name, why))
		if s.UnreachableNodeCount > 0 {
			notes = append(notes, fmt.Sprintf("%s: Unreachable targets on %s", name, nodeList(s.UnreachableNodes, s.UnreachableNodeCount)))
		}
		if s.DegradedNodeCount > 0 {
			notes = append(notes, fmt.Sprintf("%s: Degraded targets on %s", name, nodeList(s.DegradedNodes, s.DegradedNodeCount)))
		}
	}
	_ = tw.Flush()
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
}

// nodeList is the listed nodes, and how many more the count says there are.
func nodeList(names []string, count int32) string {
	text := strings.Join(names, ", ")
	if more := int(count) - len(names); more > 0 {
		text += fmt.Sprintf(" and %d more", more)
	}
	return text
}
