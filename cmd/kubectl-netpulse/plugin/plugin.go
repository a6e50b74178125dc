// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package plugin is `kubectl netpulse`: netpulse's connectivity matrix in the terminal
// (matrix), why a node or pod target reads as it does (why), the worst pairs (top), and
// the web view served from a workstation (serve). It reads PodNetworkHealth objects,
// nodes and the agent pods with the typed clients, under kubectl's kubeconfig rules
// (--kubeconfig, $KUBECONFIG, ~/.kube/config, --context and the other override flags).
package plugin

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/netpulse/netpulse/api/v1alpha1"
	"github.com/netpulse/netpulse/internal/kubeclient"
	"github.com/netpulse/netpulse/internal/matrix"
	"github.com/netpulse/netpulse/internal/viewserver"
)

// Streams are the command's input and outputs.
type Streams struct {
	In          io.Reader
	Out, ErrOut io.Writer
}

// options shared by every subcommand.
type options struct {
	streams       Streams
	kubeconfig    string
	overrides     clientcmd.ConfigOverrides
	color         string
	conditionType string
	podSelector   string
	timeout       time.Duration
	// now is the clock (tests fix it).
	now func() time.Time
}

// NewCommand is the kubectl-netpulse root command.
func NewCommand(streams Streams) *cobra.Command {
	o := &options{streams: streams, now: time.Now}
	root := &cobra.Command{
		Use:   "kubectl-netpulse",
		Short: "netpulse's pod-network connectivity: matrix, why, top, status, serve",
		Long: `kubectl netpulse shows what netpulse's pod_network_health exporter judged: which nodes
and pods cannot reach which, since when, and how fast the rest are. It reads the
PodNetworkHealth objects (all namespaces unless -n is given), the nodes' zone label and
netpulse condition, and the agent pods, with kubectl's kubeconfig rules.

Rows are observer nodes, columns target nodes. A cell without an object is "no object"
(not probed as a stable pair, and not failing): netpulse samples, it is no verdict.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	fl := root.PersistentFlags()
	fl.StringVar(&o.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	clientcmd.BindOverrideFlags(&o.overrides, fl, clientcmd.RecommendedConfigOverrideFlags(""))
	fl.StringVar(&o.color, "color", "auto", "colour output: auto (when stdout is a terminal), always, never")
	fl.StringVar(&o.conditionType, "condition-type", matrix.DefaultConditionType, "the node condition the exporter writes (node_conditions.type)")
	fl.StringVar(&o.podSelector, "pod-selector", viewserver.DefaultPodSelector, `label selector of the agent pods that place pod targets on nodes ("-": none)`)
	fl.DurationVar(&o.timeout, "timeout", 30*time.Second, "bound of the API requests")
	root.AddCommand(o.matrixCommand(), o.whyCommand(), o.topCommand(), o.statusCommand(), o.serveCommand())
	return root
}

// Main runs the command with os.Args and the process's streams and returns the exit code.
func Main() int {
	cmd := NewCommand(Streams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	return 0
}

// clientConfig follows kubectl's rules: --kubeconfig, else $KUBECONFIG (a list, merged),
// else ~/.kube/config; the override flags on top.
func (o *options) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &o.overrides)
}

func (o *options) restConfig() (*rest.Config, error) {
	cfg, err := o.clientConfig().ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "kubectl-netpulse"
	cfg.Timeout = o.timeout
	return cfg, nil
}

// namespace is -n when given, else "" (all namespaces: the matrix is cluster-wide).
func (o *options) namespace() string { return o.overrides.Context.Namespace }

// colour decides whether to write ANSI colours.
func (o *options) colour() (bool, error) {
	switch o.color {
	case "always":
		return true, nil
	case "never":
		return false, nil
	case "auto":
		if os.Getenv("NO_COLOR") != "" {
			return false, nil
		}
		if f, ok := o.streams.Out.(*os.File); ok {
			return term.IsTerminal(int(f.Fd())) && os.Getenv("TERM") != "dumb", nil
		}
		return false, nil
	}
	return false, fmt.Errorf("--color: %q: want auto, always or never", o.color)
}

// load reads the objects, nodes and agent pods (paginated LISTs) and builds the model.
func (o *options) load(ctx context.Context) (*matrix.Model, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	pc, err := kubeclient.PodNetworkHealthClient(cfg)
	if err != nil {
		return nil, err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	in := matrix.Input{Now: o.now()}
	ns := o.namespace()
	const page = 500
	opts := metav1.ListOptions{Limit: page}
	for {
		l, err := pc.NetpulseV1alpha1().PodNetworkHealths(ns).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", v1alpha1.Plural, err)
		}
		for i := range l.Items {
			in.Objects = append(in.Objects, &l.Items[i])
		}
		if opts.Continue = l.Continue; opts.Continue == "" {
			break
		}
	}
	opts = metav1.ListOptions{Limit: page}
	for {
		l, err := kc.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		for i := range l.Items {
			in.Nodes = append(in.Nodes, matrix.NodeFrom(&l.Items[i], o.conditionType))
		}
		if opts.Continue = l.Continue; opts.Continue == "" {
			break
		}
	}
	// Zone pairs are few (one per cut zone pair) and cluster-scoped: a reader without the
	// right to list them still gets everything else.
	if l, err := pc.NetpulseV1alpha1().ZoneNetworkHealths().List(ctx, metav1.ListOptions{Limit: page}); err == nil {
		for i := range l.Items {
			in.ZonePairs = append(in.ZonePairs, &l.Items[i])
		}
	} else if !apierrors.IsForbidden(err) && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("list zonenetworkhealths: %w", err)
	}
	if o.podSelector != "-" && o.podSelector != "" {
		opts = metav1.ListOptions{Limit: page, LabelSelector: o.podSelector}
		for {
			l, err := kc.CoreV1().Pods(ns).List(ctx, opts)
			if err != nil {
				return nil, fmt.Errorf("list pods %s: %w", o.podSelector, err)
			}
			for i := range l.Items {
				in.Pods = append(in.Pods, matrix.PodFrom(&l.Items[i]))
			}
			if opts.Continue = l.Continue; opts.Continue == "" {
				break
			}
		}
	}
	in.Writers = loadWriters(ctx, pc, kc, ns, in.Now)
	return matrix.Build(in), nil
}
