// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Command coredns is CoreDNS with the plugins of the Kubernetes DNS addon's Corefile
// (cluster/addons/dns/coredns) and no others: the full build links every cloud SDK that
// CoreDNS supports, which the test cluster has no use for and which costs minutes of build.
// The plugin order below is CoreDNS's own (plugin.cfg); the server runs them in this order.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives is the subset of CoreDNS's plugin.cfg order that this build links.
var directives = []string{
	"reload",
	"health",
	"ready",
	"prometheus",
	"errors",
	"log",
	"loadbalance",
	"cache",
	"loop",
	"kubernetes",
	"forward",
}

func main() {
	dnsserver.Directives = directives
	coremain.Run()
}
