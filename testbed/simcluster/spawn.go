// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package simcluster

import (
	"os/exec"
	"runtime"
	"sync"
)

// Child processes get Pdeathsig=SIGKILL so that nothing outlives a crashed harness. The
// kernel sends it when the *thread* that forked the child exits, not the process, so every
// child of this package is forked from one OS thread that is locked for the life of the
// process and never exits.
var (
	spawnOnce sync.Once
	spawnReq  chan spawnJob
)

type spawnJob struct {
	cmd  *exec.Cmd
	done chan error
}

// spawn runs cmd.Start on the spawner thread.
func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnReq = make(chan spawnJob)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread lives as long as the process
			for j := range spawnReq {
				j.done <- j.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawnReq <- spawnJob{cmd: cmd, done: done}
	return <-done
}
