// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package childproc supervises the test harnesses' child processes (etcd, kube-apiserver,
// kube-controller-manager in testbed/kubetest; collectors in testbed/simcluster): each
// runs in its own process group with its output in a log file, gets SIGKILL when the
// harness dies, and stops with SIGTERM, then SIGKILL after a grace period.
package childproc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Options of Start.
type Options struct {
	// Name in log lines and errors, and Harness, who started it ("kubetest", "simcluster").
	Name, Harness string
	// Argv is the command and its arguments; argv[0] is looked up in PATH.
	Argv []string
	// Env is the whole environment; nil inherits the harness's.
	Env []string
	// LogPath receives stdout and stderr (appended; its directory is created).
	LogPath string
	// Netns, when set, runs Argv inside that named network namespace (`ip netns exec`,
	// which execs Argv, so the PID is Argv's).
	Netns string
	// Spawn starts the command (default cmd.Start): simcluster starts children from one
	// locked OS thread, so that they never inherit a thread's network namespace.
	Spawn func(*exec.Cmd) error
}

// Process is a running (or ended) child.
type Process struct {
	Name    string
	LogPath string
	harness string
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	stopMu  sync.Mutex
}

// Start starts a child process.
func Start(o Options) (*Process, error) {
	if o.Harness == "" {
		o.Harness = "childproc"
	}
	if err := os.MkdirAll(filepath.Dir(o.LogPath), 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(o.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	argv := o.Argv
	if o.Netns != "" {
		argv = append([]string{"ip", "netns", "exec", o.Netns}, argv...)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("%s: start %s: %w", o.Harness, o.Name, err)
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Env = o.Env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(logFile, "# %s: %s started %s\n", o.Harness, o.Name, time.Now().Format(time.RFC3339Nano))
	spawn := o.Spawn
	if spawn == nil {
		spawn = (*exec.Cmd).Start
	}
	if err := spawn(cmd); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("%s: start %s: %w", o.Harness, o.Name, err)
	}
	p := &Process{Name: o.Name, LogPath: o.LogPath, harness: o.Harness, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		fmt.Fprintf(logFile, "# %s: %s exited %s: %v\n", o.Harness, o.Name, time.Now().Format(time.RFC3339Nano), p.waitErr)
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process ID (and process group ID).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

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
// is 0). Safe on nil, twice and concurrently.
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
		return fmt.Errorf("%s: %s (pid %d) did not exit after SIGKILL", p.harness, p.Name, p.Pid())
	}
}

// LogTail returns the last lines of the process's log.
func (p *Process) LogTail(lines int) string { return TailFile(p.LogPath, lines) }

// TailFile returns the last lines of a log file ("" when it cannot be read).
func TailFile(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	n := 0
	for i := len(data) - 1; i >= 0; i-- {
		if data[i] == '\n' {
			n++
			if n > lines {
				return string(data[i+1:])
			}
		}
	}
	return string(data)
}
