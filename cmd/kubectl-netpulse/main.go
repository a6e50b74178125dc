// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Command kubectl-netpulse is netpulse's kubectl plugin (`kubectl netpulse matrix|why|top|serve`):
// put it on PATH and kubectl finds it. See docs/view.md and package plugin.
package main

import (
	"os"

	"github.com/netpulse/netpulse/cmd/kubectl-netpulse/plugin"
)

func main() { os.Exit(plugin.Main()) }
