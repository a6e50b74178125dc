// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Command kube-network-policies runs SIG Network's NetworkPolicy engine
// (sigs.k8s.io/kube-network-policies, pkg/networkpolicy, at the version go.mod pins) on one
// node of the real-node test cluster (testbed/realcluster, Options.NetworkPolicy). It is
// the library's own controller as upstream's cmd/main.go starts it, with two differences:
// the API server comes from a kubeconfig (upstream's main reads the in-cluster service
// account; the nodes here run their components as host processes, like kube-proxy), and
// NRI stays disconnected. The Makefile builds it with one change to the library, for this
// machine's kernel: its queue rules use the xtables NFQUEUE target through nft_compat
// (nfqueue-compat.patch, networkpolicy/nfqueue_compat.go); a plain `go build` here gives
// upstream's nft_queue rules.
//
// NRI: upstream reads a new pod's address from containerd's NRI socket before the API
// server has it (issues.k8s.io/85966). The nodes' containerds run without NRI (its socket
// path is host-wide, testbed/realcluster's startContainerd), so pod addresses come from
// the API server only. Config.NRIdisabled cannot say so at v0.8.0: with it set the
// controller has no NRI plugin, and its address lookup (getPodAssignedToIP) calls the nil
// plugin for every address that is no pod's (the API server's, a node's), which panics.
// So NRI stays nominally on and its plugin gets a socket it cannot use
// (NRI_PLUGIN_SOCKET=none): its Run fails at once with one log line, and every lookup of
// an unknown address answers "no pod", as it would with no NRI. No host socket
// (/var/run/nri) is ever dialled.
//
// It must run in the node's network namespace (nsenter --net), as root: it installs the
// nftables table "kube-network-policies" (inet) there and reads the first packets of
// connections to and from the node's pods that a NetworkPolicy selects from NFQUEUE
// (--nfqueue-id, default 100; queues are per network namespace).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

// nriSocketEnv is the NRI stub's "connection from the environment" variable
// (github.com/containerd/nri/pkg/api.PluginSocketEnvVar): a file descriptor number. A
// value that is not one makes the stub's Run fail before it dials anything.
const nriSocketEnv = "NRI_PLUGIN_SOCKET"

func main() {
	os.Exit(run())
}

func run() int {
	var (
		kubeconfig  = flag.String("kubeconfig", "", "kubeconfig of the engine's identity (required)")
		nodeName    = flag.String("hostname-override", "", "the Node this engine runs on (required)")
		queueID     = flag.Int("nfqueue-id", 100, "NFQUEUE number the engine reads")
		failOpen    = flag.Bool("fail-open", false, "accept packets while the engine is not reading the queue")
		metricsAddr = flag.String("metrics-bind-address", "127.0.0.1:9080", "address of /metrics (kube_network_policies_packet_count{verdict})")
	)
	klog.InitFlags(nil)
	flag.Parse()
	if *kubeconfig == "" || *nodeName == "" {
		fmt.Fprintln(os.Stderr, "kube-network-policies: --kubeconfig and --hostname-override are required")
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	logger := klog.FromContext(ctx)

	if err := os.Setenv(nriSocketEnv, "none"); err != nil {
		logger.Error(err, "setting "+nriSocketEnv)
		return 1
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		logger.Error(err, "reading the kubeconfig")
		return 1
	}
	// As upstream: protobuf for the built-in types.
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.UserAgent = "kube-network-policies/" + *nodeName
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		logger.Error(err, "creating the clientset")
		return 1
	}
	factory := informers.NewSharedInformerFactory(clientset, 0)

	if _, _, err := net.SplitHostPort(*metricsAddr); err != nil {
		logger.Error(err, "parsing the metrics address", "address", *metricsAddr)
		return 1
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.Handler())
	srv := &http.Server{Addr: *metricsAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			utilruntime.HandleError(err)
		}
	}()

	ctrl, err := networkpolicy.NewController(
		clientset,
		factory.Networking().V1().NetworkPolicies(),
		factory.Core().V1().Namespaces(),
		factory.Core().V1().Pods(),
		nil, // nodes: only for (Baseline)AdminNetworkPolicy, off here
		nil, nil, nil,
		networkpolicy.Config{
			FailOpen:            *failOpen,
			QueueID:             *queueID,
			NodeName:            *nodeName,
			NetfilterBug1766Fix: true, // upstream's default
		},
	)
	if err != nil {
		logger.Error(err, "creating the NetworkPolicy controller")
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	factory.Start(ctx.Done())
	logger.Info("kube-network-policies started", "node", *nodeName, "queue", *queueID, "failOpen", *failOpen)

	code := 0
	select {
	case <-ctx.Done():
		// Run removes its nftables table as it returns.
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	case err := <-done:
		if err != nil {
			logger.Error(err, "the NetworkPolicy controller stopped")
			code = 1
		}
	}
	sctx, scancel := context.WithTimeout(context.Background(), time.Second)
	defer scancel()
	_ = srv.Shutdown(sctx)
	return code
}
