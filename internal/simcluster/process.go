// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package simcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/netpulse/netpulse/internal/kubetest"
)

// Process is a child process of the harness (a collector) whose stdout and stderr go to a
// log file. It runs in its own process group and gets SIGKILL when the harness dies.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	stopMu  sync.Mutex
}

// startProcess starts argv with env (nothing inherited); with netns set it runs inside
// that named network namespace (`ip netns exec`, which execs argv, so the PID is argv's).
func startProcess(name, netns string, argv, env []string, logPath string) (*Process, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if netns != "" {
		argv = append([]string{"ip", "netns", "exec", netns}, argv...)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		logFile.Close()
		return nil, err
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Env = env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(logFile, "# simcluster: %s started %s\n", name, time.Now().Format(time.RFC3339Nano))
	if err := spawn(cmd); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("simcluster: start %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		fmt.Fprintf(logFile, "# simcluster: %s exited %s: %v\n", name, time.Now().Format(time.RFC3339Nano), p.waitErr)
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process ID (and process group ID).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err waits for the process and returns its exit error.
func (p *Process) Err() error {
	<-p.done
	return p.waitErr
}

// Stop sends SIGTERM to the process group, then SIGKILL after grace (at once when grace
// is 0). Idempotent.
func (p *Process) Stop(grace time.Duration) error {
	if p == nil {
		return nil
	}
	p.stopMu.Lock()
	defer p.stopMu.Unlock()
	if p.Exited() {
		return nil
	}
	if grace > 0 {
		_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
		select {
		case <-p.done:
			return nil
		case <-time.After(grace):
		}
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("simcluster: %s (pid %d) did not exit after SIGKILL", p.Name, p.Pid())
	}
}

// LogTail returns the last lines of the process's log.
func (p *Process) LogTail(lines int) string { return kubetest.TailFile(p.LogPath, lines) }
