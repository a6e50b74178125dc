// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Command chartgen is `make generate-helm`: it writes the Helm chart's generated parts
// from their sources in deploy/ and builder-config.yaml (helmtest.Generate). With -check it
// only lists what is out of date and fails.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/netpulse/netpulse/testbed/helmtest"
	"github.com/netpulse/netpulse/testbed/kubetest"
)

func main() {
	check := flag.Bool("check", false, "write nothing; fail when a generated file is out of date")
	flag.Parse()
	root, err := kubetest.RepoRoot()
	if err == nil {
		var changed []string
		changed, err = helmtest.Generate(root, *check)
		for _, p := range changed {
			fmt.Println(p)
		}
		if err == nil && *check && len(changed) > 0 {
			err = fmt.Errorf("out of date: run make generate-helm")
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chartgen:", err)
		os.Exit(1)
	}
}
