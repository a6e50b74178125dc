// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"gopkg.in/yaml.v3"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "builder-config.yaml")); err != nil {
		t.Fatalf("the netpulse repository is not at %s: %v", root, err)
	}
	return root
}

// TestImage is `make image` for the host's architecture, done twice: the two archives
// must be byte for byte the same. Then the archive is read the way a container runtime
// does (index.json, the image index, the platform's manifest, config and layers, and the
// docker manifest.json beside them), its root file system unpacked, and the entrypoint run
// the way the image says (user 65532:65532) on that file system mounted read-only:
// `otelcol-netpulse components` must succeed and list netpulse's components.
//
// Needs root (a private mount namespace, a read-only bind mount, chroot) and the
// unshare, mount, chroot and touch commands (util-linux and coreutils, in every Debian).
func TestImage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestImage needs root: it runs the image's entrypoint in a private mount namespace (unshare) with a read-only root (mount) as uid 65532 (chroot); run as root")
	}
	for _, c := range []string{"unshare", "mount", "chroot", "touch"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Fatalf("%s not found: install util-linux and coreutils", c)
		}
	}
	root := repoRoot(t)
	d, err := readDist(root)
	if err != nil {
		t.Fatal(err)
	}
	plat := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	if _, ok := elfMachines[plat.Architecture]; !ok {
		t.Fatalf("host architecture %s: the image is built for amd64 and arm64 only", runtime.GOARCH)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute) // a hang guard, not an assertion
	defer cancel()
	dir := t.TempDir()

	var results []*buildResult
	for _, name := range []string{"first.tar", "second.tar"} {
		start := time.Now()
		res, err := buildArchive(ctx, buildOptions{
			root: root, platforms: []v1.Platform{plat}, out: filepath.Join(dir, name),
			repository: defaultRepository, created: time.Unix(0, 0).UTC(),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: built in %s, image index %s, archive sha256:%s (%.1f MB)", name, time.Since(start).Round(time.Second), res.index, res.sha256, float64(res.size)/1e6)
		results = append(results, res)
	}
	if results[0].index != results[1].index || results[0].sha256 != results[1].sha256 {
		t.Fatalf("not reproducible: image index %s vs %s, archive sha256 %s vs %s",
			results[0].index, results[1].index, results[0].sha256, results[1].sha256)
	}
	archive := filepath.Join(dir, "first.tar")

	// Read it back from the file, as a runtime would.
	layoutDir := filepath.Join(dir, "layout")
	untar(t, archive, layoutDir)
	img, cfg := imageFromLayout(t, layoutDir, d, plat, results[0].index)
	checkDockerManifest(t, layoutDir, img, d)

	if cfg.Config.User != imageUser {
		t.Errorf("config user %q, want %q", cfg.Config.User, imageUser)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{entrypoint}) || len(cfg.Config.Cmd) != 0 {
		t.Errorf("config entrypoint %q cmd %q", cfg.Config.Entrypoint, cfg.Config.Cmd)
	}
	for k, v := range imageLabels(d) {
		if cfg.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cfg.Config.Labels[k], v)
		}
	}
	if cfg.Config.Labels["org.opencontainers.image.version"] != d.Version {
		t.Errorf("version label %q, want builder-config.yaml's dist.version %q", cfg.Config.Labels["org.opencontainers.image.version"], d.Version)
	}

	rootfs := filepath.Join(dir, "rootfs")
	checkAndUnpack(t, img, rootfs)
	if err := checkStaticELF(filepath.Join(rootfs, "otelcol-netpulse"), plat); err != nil {
		t.Error(err)
	}
	checkBaseFiles(t, rootfs)

	out := runReadOnly(ctx, t, rootfs, cfg, "components")
	var comps struct {
		BuildInfo struct {
			Command string `yaml:"command"`
			Version string `yaml:"version"`
		} `yaml:"buildinfo"`
		Receivers  []struct{ Name string } `yaml:"receivers"`
		Processors []struct{ Name string } `yaml:"processors"`
		Exporters  []struct{ Name string } `yaml:"exporters"`
	}
	if err := yaml.Unmarshal(out, &comps); err != nil {
		t.Fatalf("components output is not YAML: %v\n%s", err, out)
	}
	if comps.BuildInfo.Command != "otelcol-netpulse" || comps.BuildInfo.Version != d.Version {
		t.Errorf("buildinfo %+v, want otelcol-netpulse %s", comps.BuildInfo, d.Version)
	}
	has := func(list []struct{ Name string }, name string) bool {
		return slices.ContainsFunc(list, func(c struct{ Name string }) bool { return c.Name == name })
	}
	if !has(comps.Receivers, "pod_probe") || !has(comps.Processors, "k8s_net_attributes") || !has(comps.Exporters, "pod_network_health") {
		t.Errorf("components lacks netpulse's own:\n%s", out)
	}
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		name := path.Clean(h.Name)
		if path.IsAbs(name) || strings.HasPrefix(name, "..") {
			t.Fatalf("archive entry %q escapes", h.Name)
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("archive entry %q has type %c", h.Name, h.Typeflag)
		}
	}
}

// imageFromLayout follows index.json → the image index → plat's manifest.
func imageFromLayout(t *testing.T, dir string, d dist, plat v1.Platform, wantIndex v1.Hash) (v1.Image, *v1.ConfigFile) {
	t.Helper()
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 {
		t.Fatalf("index.json lists %d entries, want 1", len(tm.Manifests))
	}
	desc := tm.Manifests[0]
	if desc.Digest != wantIndex {
		t.Errorf("index.json names %s, the build reported %s", desc.Digest, wantIndex)
	}
	ref := defaultRepository + ":" + d.Version
	if desc.Annotations[annotationImageName] != ref || desc.Annotations[annotationRefName] != d.Version {
		t.Errorf("index.json annotations %v, want %s=%s and %s=%s", desc.Annotations, annotationImageName, ref, annotationRefName, d.Version)
	}
	idx, err := top.ImageIndex(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range im.Manifests {
		if m.Platform != nil && m.Platform.Equals(plat) {
			img, err := idx.Image(m.Digest)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.OS != plat.OS || cfg.Architecture != plat.Architecture {
				t.Errorf("the %s manifest's config says %s/%s", platformString(plat), cfg.OS, cfg.Architecture)
			}
			return img, cfg
		}
	}
	t.Fatalf("the image index has no %s manifest: %+v", platformString(plat), im.Manifests)
	return nil, nil
}

// checkDockerManifest: manifest.json (what a classic Docker store loads) names the same
// config and layers as the OCI manifest, under the image's name.
func checkDockerManifest(t *testing.T, dir string, img v1.Image, d dist) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ms []dockerManifest
	if err := json.Unmarshal(b, &ms); err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 {
		t.Fatalf("manifest.json has %d entries for one platform", len(ms))
	}
	want := dockerManifest{Config: blobPath(m.Config.Digest), RepoTags: []string{defaultRepository + ":" + d.Version}}
	for _, l := range m.Layers {
		want.Layers = append(want.Layers, blobPath(l.Digest))
	}
	if fmt.Sprint(ms[0]) != fmt.Sprint(want) {
		t.Errorf("manifest.json %+v, want %+v", ms[0], want)
	}
}

// checkAndUnpack applies the layers in order to dir, checking every entry on the way:
// root-owned, no setuid/setgid, no extended attributes (no file capabilities), no links
// or devices, no whiteouts; and that the only executable is the entrypoint (no shell).
func checkAndUnpack(t *testing.T, img v1.Image, dir string) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var executables []string
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			name := path.Clean(h.Name)
			if path.IsAbs(name) || strings.HasPrefix(name, "..") || strings.HasPrefix(path.Base(name), ".wh.") {
				t.Fatalf("layer %d: entry %q", i, h.Name)
			}
			if h.Uid != 0 || h.Gid != 0 {
				t.Errorf("layer %d: %s owned by %d:%d, want 0:0", i, name, h.Uid, h.Gid)
			}
			if h.Mode&0o6000 != 0 {
				t.Errorf("layer %d: %s is setuid/setgid (mode %o)", i, name, h.Mode)
			}
			for k := range h.PAXRecords {
				if strings.HasPrefix(k, "SCHILY.xattr.") || strings.HasPrefix(k, "LIBARCHIVE.xattr.") {
					t.Errorf("layer %d: %s has extended attribute %s", i, name, k)
				}
			}
			p := filepath.Join(dir, filepath.FromSlash(name))
			mode := os.FileMode(h.Mode & 0o777)
			switch h.Typeflag {
			case tar.TypeDir:
				if err := os.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
			case tar.TypeReg:
				b, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, b, 0o600); err != nil {
					t.Fatal(err)
				}
				if h.Mode&0o111 != 0 {
					executables = append(executables, "/"+name)
				}
			default:
				t.Fatalf("layer %d: %s has type %c; the image holds directories and regular files only", i, name, h.Typeflag)
			}
			if h.Mode&0o1000 != 0 {
				mode |= os.ModeSticky
			}
			if err := os.Chmod(p, mode); err != nil {
				t.Fatal(err)
			}
		}
		rc.Close()
	}
	if !slices.Equal(executables, []string{entrypoint}) {
		t.Errorf("executables in the image: %v, want only %s (no shell, no other program)", executables, entrypoint)
	}
}

func checkBaseFiles(t *testing.T, rootfs string) {
	t.Helper()
	passwd, err := os.ReadFile(filepath.Join(rootfs, "etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(passwd), "\nnonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no nonroot 65532:\n%s", passwd)
	}
	pem, err := os.ReadFile(filepath.Join(rootfs, "etc/ssl/certs/ca-certificates.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) || bytes.Count(pem, []byte("BEGIN CERTIFICATE")) < 100 {
		t.Errorf("/etc/ssl/certs/ca-certificates.crt: %d certificates, want the web PKI roots", bytes.Count(pem, []byte("BEGIN CERTIFICATE")))
	}
	st, err := os.Stat(filepath.Join(rootfs, "tmp"))
	if err != nil || st.Mode()&os.ModeSticky == 0 || st.Mode().Perm() != 0o777 {
		t.Errorf("/tmp: %v %v, want drwxrwxrwt", st.Mode(), err)
	}
}

// The runner: a private mount namespace (nothing leaks to the host's mount table, even if
// the test dies), rootfs bind-mounted on itself and remounted read-only, a check that it
// is read-only, then chroot into it as the image's user with only the image's
// environment. The image has no shell, so the shell here is the host's, before chroot.
const runScript = `set -eu
root=$1; shift
mount --bind "$root" "$root"
mount -o remount,bind,ro "$root"
if touch "$root/.netpulse-write-probe" 2>/dev/null; then
  echo "the root file system is writable after the read-only remount" >&2; exit 97
fi
exec "$@"
`

func runReadOnly(ctx context.Context, t *testing.T, rootfs string, cfg *v1.ConfigFile, args ...string) []byte {
	t.Helper()
	chroot, err := exec.LookPath("chroot")
	if err != nil {
		t.Fatal(err)
	}
	envCmd, err := exec.LookPath("env")
	if err != nil {
		t.Fatal(err)
	}
	user := cfg.Config.User
	if !strings.Contains(user, ":") {
		user += ":" + user
	}
	// env -i: the process gets the image's Env and nothing of the test's.
	argv := []string{"--mount", "--propagation", "private", "--fork", "--", "/bin/sh", "-c", runScript, "sh", rootfs, envCmd, "-i"}
	argv = append(argv, cfg.Config.Env...)
	argv = append(argv, chroot, "--userspec="+user, rootfs)
	argv = append(argv, cfg.Config.Entrypoint...)
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, "unshare", argv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s as %s on a read-only root: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(cfg.Config.Entrypoint, " "), strings.Join(args, " "), user, err, out, stderr.Bytes())
	}
	return out
}
