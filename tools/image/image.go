// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations on the archive's index.json entry that name the image: containerd (ctr
// images import, kind load image-archive, docker load with the containerd image store)
// takes the full name from the first, the OCI image-layout spec defines the second (the
// tag alone). `docker save` writes the same two.
const (
	annotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

// spec is what the image is made of besides the binaries.
type spec struct {
	dist       dist
	repository string    // e.g. ghcr.io/netpulse/otelcol-netpulse
	created    time.Time // config "created", history and every file time
}

func (s spec) reference() string { return s.repository + ":" + s.dist.Version }

// platformBinary is one platform's static otelcol-netpulse.
type platformBinary struct {
	platform v1.Platform
	binary   []byte
}

// built is an assembled image: the multi-platform index, its images in the order of the
// platforms, and the top-level index (index.json of the archive) that names it.
type built struct {
	index  v1.ImageIndex
	images []v1.Image
	top    v1.ImageIndex
}

// assemble makes one image per platform (a base layer the platforms share, then the
// binary) and the OCI image index of them. Nothing but the spec and the binaries goes
// in: no clock, no host file, no user or machine name.
func assemble(s spec, bins []platformBinary) (*built, error) {
	if len(bins) == 0 {
		return nil, fmt.Errorf("no platforms")
	}
	base, err := newLayer(baseFiles(), s.created)
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	out := &built{}
	seen := map[string]bool{}
	for _, pb := range bins {
		ps := platformString(pb.platform)
		if seen[ps] {
			return nil, fmt.Errorf("platform %s twice", ps)
		}
		seen[ps] = true
		bin, err := newLayer(binaryFiles(pb.binary), s.created)
		if err != nil {
			return nil, fmt.Errorf("%s: binary layer: %w", ps, err)
		}
		img, err := platformImage(s, pb.platform, base, bin)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ps, err)
		}
		p := pb.platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1, Platform: &p},
		})
		out.images = append(out.images, img)
	}
	out.index = idx
	out.top = mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{
		Add: idx,
		Descriptor: v1.Descriptor{MediaType: types.OCIImageIndex, Annotations: map[string]string{
			annotationImageName: s.reference(),
			annotationRefName:   s.dist.Version,
		}},
	})
	return out, nil
}

func newLayer(files []file, mtime time.Time) (v1.Layer, error) {
	raw, err := layerTar(files, mtime)
	if err != nil {
		return nil, err
	}
	gz, err := gzipBytes(raw)
	if err != nil {
		return nil, err
	}
	// The opener hands over gzip bytes, so the layer is used as it is (not recompressed).
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

func platformImage(s spec, p v1.Platform, base, bin v1.Layer) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	created := v1.Time{Time: s.created}
	img, err := mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
			Created:   created,
			CreatedBy: "tools/image: /etc/passwd, /etc/group, /etc/nsswitch.conf, /etc/ssl/certs/ca-certificates.crt, /tmp",
		}},
		mutate.Addendum{Layer: bin, MediaType: types.OCILayer, History: v1.History{
			Created:   created,
			CreatedBy: "tools/image: " + entrypoint + " (CGO_ENABLED=0 go " + strings.Join(goBuildArgs, " ") + ")",
		}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture = p.Architecture
	cf.OS = p.OS
	cf.Variant = p.Variant
	cf.Created = created
	cf.Author = ""
	cf.Config = v1.Config{
		User:       imageUser,
		Entrypoint: []string{entrypoint},
		Labels:     imageLabels(s.dist),
	}
	return mutate.ConfigFile(img, cf)
}

// dockerManifest is one entry of manifest.json, the `docker save` format that a Docker
// Engine with the classic (graph driver) image store loads; paths point into the OCI
// layout's blobs.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// writeArchive writes b as one tar file that is both an OCI image layout (oci-layout,
// index.json, blobs/) and a `docker save` archive (manifest.json), the shape `docker save`
// itself has written since Docker 25. The tar's bytes depend only on b: entries in path
// order, owned by 0:0, modes 0755/0644, times set to mtime.
func writeArchive(path string, s spec, b *built) error {
	dir, err := os.MkdirTemp("", "netpulse-image-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if _, err := layout.Write(dir, b.top); err != nil {
		return fmt.Errorf("write OCI layout: %w", err)
	}
	mj, err := dockerManifestJSON(s, b)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), mj, 0o644); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := tarTree(f, dir, s.created); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// dockerManifestJSON lists every platform's image under the image's name. The classic
// Docker store loads them all and the last one keeps the tag (Docker 28+ loads only one
// with `docker load --platform`), so the entries are in reverse platform order: the first
// platform (linux/amd64 in `make image`) is the one a plain `docker load` tags.
func dockerManifestJSON(s spec, b *built) ([]byte, error) {
	var ms []dockerManifest
	for i := len(b.images) - 1; i >= 0; i-- {
		img := b.images[i]
		m, err := img.Manifest()
		if err != nil {
			return nil, err
		}
		dm := dockerManifest{Config: blobPath(m.Config.Digest), RepoTags: []string{s.reference()}}
		for _, l := range m.Layers {
			dm.Layers = append(dm.Layers, blobPath(l.Digest))
		}
		ms = append(ms, dm)
	}
	return json.Marshal(ms)
}

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

// tarTree writes the regular files and directories under dir, sorted by path.
func tarTree(w io.Writer, dir string, mtime time.Time) error {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(paths)
	tw := tar.NewWriter(w)
	for _, p := range paths {
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Format: tar.FormatPAX}
		if st.IsDir() {
			hdr.Typeflag, hdr.Mode, hdr.Name = tar.TypeDir, 0o755, hdr.Name+"/"
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			continue
		}
		hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, st.Size()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

func platformString(p v1.Platform) string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

func parsePlatform(s string) (v1.Platform, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 2 || parts[0] != "linux" {
		return v1.Platform{}, fmt.Errorf("platform %q: want linux/<arch>", s)
	}
	p := v1.Platform{OS: parts[0], Architecture: parts[1]}
	if _, ok := elfMachines[p.Architecture]; !ok {
		return v1.Platform{}, fmt.Errorf("platform %q: supported architectures are amd64 and arm64", s)
	}
	return p, nil
}
