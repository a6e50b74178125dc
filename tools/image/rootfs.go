// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/pem"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The image runs as this user and group unless the pod says otherwise (the deploy/
// manifests set their own runAsUser; any uid works, every file is world-readable and the
// entrypoint world-executable). 65532 is distroless' "nonroot".
const (
	imageUID   = 65532
	imageGID   = 65532
	imageUser  = "65532:65532"
	entrypoint = "/otelcol-netpulse"
)

// file is one entry of the image's file system. Every entry is owned by root (uid/gid 0):
// nothing in the image is writable by the user it runs as.
type file struct {
	path string // without a leading slash
	mode fs.FileMode
	dir  bool
	data []byte
}

// baseFiles are the files every platform's image has besides the binary, the same bytes
// on every platform: what a static Go program needs from a distribution (user and group
// names for the uid, the resolver order, the web PKI roots for TLS exporters) and an
// empty /tmp. There is no shell and no other program.
func baseFiles() []file {
	return []file{
		{path: "etc", mode: 0o755, dir: true},
		{path: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\nnogroup:x:65534:\n")},
		{path: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{path: "etc/passwd", mode: 0o644, data: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n" +
				"nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n" +
				"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")},
		{path: "etc/ssl", mode: 0o755, dir: true},
		{path: "etc/ssl/certs", mode: 0o755, dir: true},
		{path: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: caBundle()},
		{path: "tmp", mode: 0o777 | fs.ModeSticky, dir: true},
	}
}

// caBundle is the Mozilla (NSS) root store as shipped by golang.org/x/crypto/x509roots,
// pinned in this module's go.mod, so it changes only when that pin does (not with the
// machine that builds the image). Roots that NSS trusts only with a constraint X.509
// cannot express (a distrust-after date) are left out: a PEM file would trust them
// without it.
func caBundle() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if err := pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			panic(err) // writing to a bytes.Buffer does not fail
		}
	}
	return b.Bytes()
}

// binaryFiles is the platform's layer: the entrypoint.
func binaryFiles(bin []byte) []file {
	return []file{{path: strings.TrimPrefix(entrypoint, "/"), mode: 0o755, data: bin}}
}

// layerTar writes files as a tar stream that depends only on their paths, modes and
// contents: sorted by path, owned by 0:0 with no user or group names, every time set to
// mtime, no extended attributes (so no file capabilities: the manifests grant what the
// probes need to the pod, see docs/image.md), the PAX format only where USTAR cannot
// hold a field.
func layerTar(files []file, mtime time.Time) ([]byte, error) {
	files = append([]file(nil), files...)
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	seen := map[string]bool{}
	for _, f := range files {
		if f.path == "" || path.IsAbs(f.path) || path.Clean(f.path) != f.path {
			return nil, fmt.Errorf("bad path %q", f.path)
		}
		if seen[f.path] {
			return nil, fmt.Errorf("duplicate path %q", f.path)
		}
		seen[f.path] = true
		if d := path.Dir(f.path); d != "." && !seen[d] {
			return nil, fmt.Errorf("%s: parent directory %s is not in the layer before it", f.path, d)
		}
		hdr := &tar.Header{
			Name:    f.path,
			Mode:    tarMode(f.mode),
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		if f.dir {
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarMode is the mode as a tar header holds it (the permission bits plus setuid, setgid
// and sticky in their Unix positions).
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// gzipBytes compresses with a fixed level and an empty gzip header (no name, no time):
// the same input gives the same bytes with the same Go release.
func gzipBytes(b []byte) ([]byte, error) {
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// writeTree writes files under dir with their modes, for the Dockerfile, whose last stage
// copies the tree into an empty image (`COPY --from=build /rootfs/ /`).
func writeTree(dir string, files []file) error {
	files = append([]file(nil), files...)
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.path))
		if f.dir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		} else if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return err
		}
		// Chmod after creation: the umask does not apply, and sticky needs it.
		if err := os.Chmod(p, f.mode); err != nil {
			return err
		}
	}
	return nil
}
