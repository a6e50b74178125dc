// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package kubetest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// KubeVersion is the Kubernetes release the tools module (tools/kube) builds.
const KubeVersion = "v1.36.3"

// Environment variables understood by the binary lookup.
const (
	// EnvBinDir points at a directory holding kube-apiserver and kube-controller-manager.
	EnvBinDir = "NETPULSE_KUBE_BIN_DIR"
	// EnvNoBuild=1 turns a missing binary into an error instead of a build (about five
	// minutes cold on two cores).
	EnvNoBuild = "NETPULSE_KUBE_NO_BUILD"
	// EnvEtcd overrides the etcd binary (default: etcd on PATH, as installed by Debian's etcd-server).
	EnvEtcd = "NETPULSE_ETCD"
)

// kubeLDFlags stamps the version the binaries report (same as the Makefile's KUBE_LDFLAGS).
const kubeLDFlags = "-X k8s.io/component-base/version.gitVersion=" + KubeVersion +
	" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36" +
	" -X k8s.io/client-go/pkg/version.gitVersion=" + KubeVersion

const modulePath = "github.com/netpulse/netpulse"

// RepoRoot finds the netpulse module root by walking up from the working directory,
// which is the package directory under `go test`.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isNetpulseRoot(dir) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("kubetest: cannot find the netpulse module root (a go.mod declaring " + modulePath + ") above the working directory")
		}
		dir = parent
	}
}

func isNetpulseRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == modulePath
		}
	}
	return false
}

// Binaries are the paths of the control-plane executables.
type Binaries struct {
	Etcd              string
	APIServer         string
	ControllerManager string
	Kubectl           string // optional: empty when not built
}

// FindBinaries locates etcd and the Kubernetes binaries. Kubernetes binaries come from
// $NETPULSE_KUBE_BIN_DIR or <repo>/bin; when they are missing they are built from the
// tools/kube module (under a file lock, so parallel test packages build once) unless
// NETPULSE_KUBE_NO_BUILD=1. Errors say exactly what is missing and how to get it.
func FindBinaries() (Binaries, error) {
	var b Binaries
	etcd := os.Getenv(EnvEtcd)
	if etcd == "" {
		p, err := exec.LookPath("etcd")
		if err != nil {
			return b, errors.New("kubetest: etcd not found on PATH; install Debian's etcd-server (apt-get install -y etcd-server) or set " + EnvEtcd)
		}
		etcd = p
	}
	b.Etcd = etcd

	binDir := os.Getenv(EnvBinDir)
	root, rootErr := RepoRoot()
	if binDir == "" {
		if rootErr != nil {
			return b, rootErr
		}
		binDir = filepath.Join(root, "bin")
	}
	b.APIServer = filepath.Join(binDir, "kube-apiserver")
	b.ControllerManager = filepath.Join(binDir, "kube-controller-manager")
	if k := filepath.Join(binDir, "kubectl"); isExecutable(k) {
		b.Kubectl = k
	}
	if isExecutable(b.APIServer) && isExecutable(b.ControllerManager) {
		return b, nil
	}
	if os.Getenv(EnvNoBuild) == "1" {
		return b, fmt.Errorf("kubetest: %s or %s missing and %s=1; run `make kube-bins` (builds Kubernetes %s from tools/kube)", b.APIServer, b.ControllerManager, EnvNoBuild, KubeVersion)
	}
	if rootErr != nil {
		return b, rootErr
	}
	if err := buildKubeBinaries(root, binDir); err != nil {
		return b, err
	}
	return b, nil
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// buildKubeBinaries runs the same build as `make kube-bins`, serialised by a file lock.
func buildKubeBinaries(root, binDir string) error {
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(binDir, ".kube-build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("kubetest: lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck
	if isExecutable(filepath.Join(binDir, "kube-apiserver")) && isExecutable(filepath.Join(binDir, "kube-controller-manager")) {
		return nil // another package built them while we waited
	}
	cmd := exec.Command("go", "build", "-ldflags", kubeLDFlags, "-o", binDir+"/",
		"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager")
	cmd.Dir = filepath.Join(root, "tools", "kube")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubetest: building Kubernetes %s binaries in %s failed: %w\n%s", KubeVersion, cmd.Dir, err, out)
	}
	return nil
}
