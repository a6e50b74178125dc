// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// helperImage writes a one-platform image of a static binary built elsewhere (the real-node
// test cluster's pause and CoreDNS images, testbed/realcluster) as an OCI archive that
// `ctr images import` names ref. The same base files as the netpulse image; the binary at
// entrypoint, run as user.
func helperImage(binPath, ref, entrypoint, user, platform, out string, extraArgs []string) error {
	if binPath == "" || ref == "" || out == "" || !strings.HasPrefix(entrypoint, "/") {
		return errors.New("helper: -bin, -ref, -o and an absolute -entrypoint are required")
	}
	p, err := parsePlatform(platform)
	if err != nil {
		return err
	}
	bin, err := os.ReadFile(binPath)
	if err != nil {
		return err
	}
	if err := checkStaticELF(binPath, p); err != nil {
		return err
	}
	created, err := sourceDateEpoch()
	if err != nil {
		return err
	}
	base, err := newLayer(baseFiles(), created)
	if err != nil {
		return err
	}
	binLayer, err := newLayer([]file{{path: strings.TrimPrefix(entrypoint, "/"), mode: 0o755, data: bin}}, created)
	if err != nil {
		return err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer},
		mutate.Addendum{Layer: binLayer, MediaType: types.OCILayer})
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = p.Architecture, p.OS
	cf.Created = v1.Time{Time: created}
	cf.Config = v1.Config{User: user, Entrypoint: []string{entrypoint}, Cmd: extraArgs}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tag := ref[strings.LastIndex(ref, ":")+1:]
	top := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{
		Add: img,
		Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1, Platform: &p, Annotations: map[string]string{
			annotationImageName: ref,
			annotationRefName:   tag,
		}},
	})
	dir, err := os.MkdirTemp("", "netpulse-helper-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if _, err := layout.Write(dir, top); err != nil {
		return fmt.Errorf("write OCI layout: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(out + ".tmp")
	if err != nil {
		return err
	}
	defer os.Remove(out + ".tmp")
	if err := tarTree(f, dir, created); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(out+".tmp", out)
}
