// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package realcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/netpulse/netpulse/testbed/kubetest"
)

// EnvBinDir points at the directory `make node-bins` fills (default <repo>/bin/realnode).
const EnvBinDir = "NETPULSE_REALNODE_BIN_DIR"

// Images built here and imported into every node's containerd. The names are the ones the
// kubelet (through containerd's pinned sandbox image) and the DNS addon ask for, so nothing
// is ever pulled.
const (
	PauseImage   = "registry.k8s.io/pause:3.10.2"
	CoreDNSImage = "registry.k8s.io/coredns/coredns:v1.15.0"
)

// Binaries are the node programs and image archives.
type Binaries struct {
	Dir           string
	Kubelet       string
	KubeProxy     string
	KubeScheduler string
	Containerd    string
	Shim          string // containerd-shim-runc-v2
	Ctr           string
	CNIDir        string // bridge, host-local, loopback, portmap
	// KubeNetworkPolicies is SIG Network's NetworkPolicy engine (tools/netpol), needed only
	// with Options.NetworkPolicy.
	KubeNetworkPolicies string
	PauseArchive        string
	CoreDNSArchive      string
	// From the host (Debian packages).
	Runc, Nft, Nsenter string
}

// FindBinaries locates everything a node needs and names every missing piece with how to
// get it: a missing tool fails the suite, it never skips it.
func FindBinaries() (Binaries, error) {
	dir := os.Getenv(EnvBinDir)
	if dir == "" {
		root, err := kubetest.RepoRoot()
		if err != nil {
			return Binaries{}, err
		}
		dir = filepath.Join(root, "bin", "realnode")
	}
	b := Binaries{
		Dir:                 dir,
		Kubelet:             filepath.Join(dir, "kubelet"),
		KubeProxy:           filepath.Join(dir, "kube-proxy"),
		KubeScheduler:       filepath.Join(dir, "kube-scheduler"),
		Containerd:          filepath.Join(dir, "containerd"),
		Shim:                filepath.Join(dir, "containerd-shim-runc-v2"),
		Ctr:                 filepath.Join(dir, "ctr"),
		CNIDir:              filepath.Join(dir, "cni"),
		KubeNetworkPolicies: filepath.Join(dir, "kube-network-policies"),
		PauseArchive:        filepath.Join(dir, "images", "pause.tar"),
		CoreDNSArchive:      filepath.Join(dir, "images", "coredns.tar"),
	}
	var missing []string
	for _, p := range []string{b.Kubelet, b.KubeProxy, b.KubeScheduler, b.Containerd, b.Shim, b.Ctr,
		filepath.Join(b.CNIDir, "bridge"), filepath.Join(b.CNIDir, "host-local"), filepath.Join(b.CNIDir, "loopback"), filepath.Join(b.CNIDir, "portmap"),
		b.PauseArchive, b.CoreDNSArchive} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return b, fmt.Errorf("realcluster: missing %s (run `make node-bins`, or set %s)", strings.Join(missing, ", "), EnvBinDir)
	}
	var errs []error
	for _, t := range []struct {
		name, pkg string
		dst       *string
	}{{"runc", "runc", &b.Runc}, {"nft", "nftables", &b.Nft}, {"nsenter", "util-linux", &b.Nsenter}, {"ip", "iproute2", new(string)},
		{"iptables", "iptables", new(string)}, {"ip6tables", "iptables", new(string)}} {
		p, err := exec.LookPath(t.name)
		if err != nil {
			errs = append(errs, fmt.Errorf("realcluster: %s not found on PATH (Debian package %s; `make deps` installs it)", t.name, t.pkg))
			continue
		}
		*t.dst = p
	}
	return b, errors.Join(errs...)
}
