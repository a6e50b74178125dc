// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Tests of the assembly with stand-in binaries: fast, no go build, no root.

var (
	amd64 = v1.Platform{OS: "linux", Architecture: "amd64"}
	arm64 = v1.Platform{OS: "linux", Architecture: "arm64"}
)

func testSpec(created time.Time) spec {
	return spec{
		dist:       dist{Name: "otelcol-netpulse", Description: "test", Version: "1.2.3"},
		repository: defaultRepository,
		created:    created,
	}
}

func twoPlatforms(amdBin, armBin string) []platformBinary {
	return []platformBinary{
		{platform: amd64, binary: []byte(amdBin)},
		{platform: arm64, binary: []byte(armBin)},
	}
}

func mustAssemble(t *testing.T, s spec, bins []platformBinary) *built {
	t.Helper()
	b, err := assemble(s, bins)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func digestOf(t *testing.T, b *built) v1.Hash {
	t.Helper()
	h, err := b.index.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestAssembleMultiPlatform(t *testing.T) {
	epoch := time.Unix(0, 0).UTC()
	b := mustAssemble(t, testSpec(epoch), twoPlatforms("amd64 binary", "arm64 binary"))

	im, err := b.index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 2 {
		t.Fatalf("index has %d manifests, want 2", len(im.Manifests))
	}
	var layers [][]v1.Hash
	for i, want := range []v1.Platform{amd64, arm64} {
		d := im.Manifests[i]
		if d.Platform == nil || !d.Platform.Equals(want) {
			t.Fatalf("manifest %d: platform %v, want %v", i, d.Platform, want)
		}
		cf, err := b.images[i].ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != want.OS || cf.Architecture != want.Architecture {
			t.Errorf("config of %s says %s/%s", platformString(want), cf.OS, cf.Architecture)
		}
		if cf.Config.User != "65532:65532" || !slices.Equal(cf.Config.Entrypoint, []string{"/otelcol-netpulse"}) {
			t.Errorf("config: user %q entrypoint %q", cf.Config.User, cf.Config.Entrypoint)
		}
		if got := cf.Config.Labels["org.opencontainers.image.version"]; got != "1.2.3" {
			t.Errorf("version label %q", got)
		}
		if !cf.Created.Time.Equal(epoch) {
			t.Errorf("created %v, want %v", cf.Created.Time, epoch)
		}
		m, err := b.images[i].Manifest()
		if err != nil {
			t.Fatal(err)
		}
		var ls []v1.Hash
		for _, l := range m.Layers {
			ls = append(ls, l.Digest)
		}
		layers = append(layers, ls)
	}
	if layers[0][0] != layers[1][0] {
		t.Errorf("the base layer differs between platforms: %v %v", layers[0][0], layers[1][0])
	}
	if layers[0][1] == layers[1][1] {
		t.Errorf("the binary layers of the two platforms are the same")
	}

	top, err := b.top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	idxDigest := digestOf(t, b)
	if len(top.Manifests) != 1 || top.Manifests[0].Digest != idxDigest {
		t.Fatalf("index.json should name the image index %v: %+v", idxDigest, top.Manifests)
	}
	if a := top.Manifests[0].Annotations; a[annotationImageName] != defaultRepository+":1.2.3" || a[annotationRefName] != "1.2.3" {
		t.Errorf("index.json annotations %v", a)
	}
}

// The digest depends on the binaries and on the time given, on nothing else.
func TestAssembleDigestInputs(t *testing.T) {
	epoch := time.Unix(0, 0).UTC()
	d0 := digestOf(t, mustAssemble(t, testSpec(epoch), twoPlatforms("a", "b")))
	if d := digestOf(t, mustAssemble(t, testSpec(epoch), twoPlatforms("a", "b"))); d != d0 {
		t.Errorf("same inputs, different digests: %v %v", d0, d)
	}
	if d := digestOf(t, mustAssemble(t, testSpec(epoch), twoPlatforms("a", "B"))); d == d0 {
		t.Errorf("a different arm64 binary gave the same digest")
	}
	later := time.Unix(1700000000, 0).UTC()
	bl := mustAssemble(t, testSpec(later), twoPlatforms("a", "b"))
	if digestOf(t, bl) == d0 {
		t.Errorf("a different SOURCE_DATE_EPOCH gave the same digest")
	}
	// Every file of every layer carries that time.
	for _, img := range bl.images {
		ls, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
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
				if !h.ModTime.Equal(later) {
					t.Errorf("%s: mtime %v, want %v", h.Name, h.ModTime, later)
				}
			}
			rc.Close()
		}
	}
}

func TestWriteArchiveReproducible(t *testing.T) {
	dir := t.TempDir()
	s := testSpec(time.Unix(0, 0).UTC())
	var files [][]byte
	for i, name := range []string{"one.tar", "two.tar"} {
		b := mustAssemble(t, s, twoPlatforms("amd64 binary", "arm64 binary"))
		p := filepath.Join(dir, name)
		if err := writeArchive(p, s, b); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, data)
		if i == 0 {
			checkArchiveShape(t, data, b)
		}
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Fatal("two archives of the same inputs differ")
	}
}

// checkArchiveShape: an OCI layout whose index.json names the image index, every blob
// present, and a manifest.json whose last entry is the first platform.
func checkArchiveShape(t *testing.T, data []byte, b *built) {
	t.Helper()
	entries := map[string][]byte{}
	var names []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: owner %d:%d %q:%q", h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
		}
		names = append(names, h.Name)
		if h.Typeflag == tar.TypeReg {
			c, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			entries[h.Name] = c
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("archive entries are not sorted: %v", names)
	}
	var ociLayout struct {
		ImageLayoutVersion string `json:"imageLayoutVersion"`
	}
	if err := json.Unmarshal(entries["oci-layout"], &ociLayout); err != nil || ociLayout.ImageLayoutVersion != "1.0.0" {
		t.Errorf("oci-layout: %q (%v)", entries["oci-layout"], err)
	}
	var index v1.IndexManifest
	if err := json.Unmarshal(entries["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	idx := digestOf(t, b)
	if len(index.Manifests) != 1 || index.Manifests[0].Digest != idx {
		t.Fatalf("index.json: %+v, want the image index %v", index.Manifests, idx)
	}
	if _, ok := entries[blobPath(idx)]; !ok {
		t.Errorf("the image index blob is missing")
	}
	var ms []dockerManifest
	if err := json.Unmarshal(entries["manifest.json"], &ms); err != nil {
		t.Fatal(err)
	}
	if len(ms) != len(b.images) {
		t.Fatalf("manifest.json has %d entries, want %d", len(ms), len(b.images))
	}
	for i, m := range ms {
		img := b.images[len(b.images)-1-i]
		mf, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if m.Config != blobPath(mf.Config.Digest) {
			t.Errorf("manifest.json[%d].Config %s, want %s", i, m.Config, blobPath(mf.Config.Digest))
		}
		if !slices.Equal(m.RepoTags, []string{defaultRepository + ":1.2.3"}) {
			t.Errorf("manifest.json[%d].RepoTags %v", i, m.RepoTags)
		}
		for _, p := range append([]string{m.Config}, m.Layers...) {
			if _, ok := entries[p]; !ok {
				t.Errorf("manifest.json names %s, which the archive lacks", p)
			}
		}
	}
	// The first platform (amd64) is the last entry: the one a classic `docker load` tags.
	last := ms[len(ms)-1]
	cfg := map[string]any{}
	if err := json.Unmarshal(entries[last.Config], &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg["architecture"] != "amd64" {
		t.Errorf("the last manifest.json entry is %v, want amd64", cfg["architecture"])
	}
}

func TestLayerTarRejects(t *testing.T) {
	for name, files := range map[string][]file{
		"absolute":       {{path: "/etc", dir: true, mode: 0o755}},
		"dotdot":         {{path: "etc/../x", mode: 0o644}},
		"duplicate":      {{path: "a", mode: 0o644}, {path: "a", mode: 0o644}},
		"missing parent": {{path: "etc/passwd", mode: 0o644}},
	} {
		if _, err := layerTar(files, time.Unix(0, 0)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParsePlatform(t *testing.T) {
	if p, err := parsePlatform("linux/arm64"); err != nil || !p.Equals(arm64) {
		t.Errorf("linux/arm64: %v %v", p, err)
	}
	for _, bad := range []string{"", "linux", "windows/amd64", "linux/s390x", "linux/arm/v7"} {
		if _, err := parsePlatform(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
