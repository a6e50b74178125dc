// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"gopkg.in/yaml.v3"
)

// The image's name without a tag. The deploy/ manifests name the same repository, and
// deploy/agent-gateway/kustomization.yaml sets its tag through `images:`.
const defaultRepository = "ghcr.io/netpulse/otelcol-netpulse"

// dist is the part of builder-config.yaml the image is made from. Its version
// (dist.version) is the one authoritative version of netpulse: ocb writes it into the
// binary (`otelcol-netpulse components` prints it), the image tool puts it in the image's
// labels and tag, and tests check that the kustomize `images:` newTag, the Dockerfile and
// the example manifests agree with it.
type dist struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Version     string `yaml:"version"`
}

// semver-like: what a tag may hold and what a release is called.
var versionRE = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

func readDist(root string) (dist, error) {
	p := filepath.Join(root, "builder-config.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		return dist{}, err
	}
	var cfg struct {
		Dist dist `yaml:"dist"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return dist{}, fmt.Errorf("%s: %w", p, err)
	}
	d := cfg.Dist
	if d.Name == "" {
		return dist{}, fmt.Errorf("%s: dist.name is empty", p)
	}
	if !versionRE.MatchString(d.Version) {
		return dist{}, fmt.Errorf("%s: dist.version %q is not a version like 1.2.3", p, d.Version)
	}
	return d, nil
}

// Labels of the image (org.opencontainers.image.*, the OCI annotation keys). The
// Dockerfile carries the same LABELs; TestDockerfileAgrees keeps them equal.
func imageLabels(d dist) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       d.Name,
		"org.opencontainers.image.description": d.Description,
		"org.opencontainers.image.version":     d.Version,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.source":      "https://github.com/netpulse/netpulse",
	}
}
