// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package simcluster

import "github.com/netpulse/netpulse/testbed/childproc"

// Process is a child process of the harness (a collector) whose stdout and stderr go to a
// log file. It runs in its own process group and gets SIGKILL when the harness dies.
type Process = childproc.Process

// startProcess starts argv with env (nothing inherited); with netns set it runs inside
// that named network namespace.
func startProcess(name, netns string, argv, env []string, logPath string) (*Process, error) {
	if env == nil {
		env = []string{}
	}
	return childproc.Start(childproc.Options{Name: name, Harness: "simcluster", Argv: argv, Env: env, LogPath: logPath, Netns: netns, Spawn: spawn})
}
