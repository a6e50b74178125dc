// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// builder-config.yaml's dist.version is the version. These tests keep every other place
// that names it equal to it: the Dockerfile (its VERSION default, its labels, which must
// be the labels `make image` writes), the kustomize images: entry and any tag the
// manifests carry.

func TestDockerfileAgrees(t *testing.T) {
	root := repoRoot(t)
	d, err := readDist(root)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// Instructions of the last stage, continuation lines joined, comments dropped.
	var instrs []string
	var cur strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		if strings.HasPrefix(strings.ToUpper(cur.String()), "FROM ") {
			instrs = nil
		}
		instrs = append(instrs, cur.String())
		cur.Reset()
	}
	if len(instrs) == 0 || !strings.EqualFold(instrs[0], "FROM scratch") {
		t.Fatalf("the Dockerfile's last stage should be FROM scratch: %q", instrs)
	}
	args := map[string]string{}
	labels := map[string]string{}
	var user, entry string
	labelRE := regexp.MustCompile(`([A-Za-z0-9_.-]+)="((?:[^"\\]|\\.)*)"`)
	for _, in := range instrs {
		kw, rest, _ := strings.Cut(in, " ")
		switch strings.ToUpper(kw) {
		case "ARG":
			k, v, _ := strings.Cut(rest, "=")
			args[k] = v
		case "LABEL":
			for _, m := range labelRE.FindAllStringSubmatch(rest, -1) {
				labels[m[1]] = os.Expand(m[2], func(k string) string { return args[k] })
			}
		case "USER":
			user = rest
		case "ENTRYPOINT":
			entry = rest
		}
	}
	if args["VERSION"] != d.Version {
		t.Errorf("Dockerfile: ARG VERSION=%s, builder-config.yaml dist.version is %s", args["VERSION"], d.Version)
	}
	want := imageLabels(d)
	for k, v := range want {
		if labels[k] != v {
			t.Errorf("Dockerfile: LABEL %s=%q, the image tool writes %q", k, labels[k], v)
		}
	}
	for k := range labels {
		if _, ok := want[k]; !ok {
			t.Errorf("Dockerfile: LABEL %s, which the image tool does not write", k)
		}
	}
	if user != imageUser {
		t.Errorf("Dockerfile: USER %s, want %s", user, imageUser)
	}
	var ep []string
	if err := json.Unmarshal([]byte(entry), &ep); err != nil || len(ep) != 1 || ep[0] != entrypoint {
		t.Errorf("Dockerfile: ENTRYPOINT %s, want [%q] (%v)", entry, entrypoint, err)
	}
	checkTags(t, "Dockerfile", string(b), d.Version)
}

var tagRE = regexp.MustCompile(regexp.QuoteMeta(defaultRepository) + `(:[A-Za-z0-9_.-]+)?`)

// checkTags: every tag given to the image's name in text is the version.
func checkTags(t *testing.T, name, text, version string) {
	t.Helper()
	for _, m := range tagRE.FindAllStringSubmatch(text, -1) {
		if m[1] != "" && m[1] != ":"+version {
			t.Errorf("%s: %s, want the tag %s (builder-config.yaml dist.version)", name, m[0], version)
		}
	}
}

func TestManifestsAgree(t *testing.T) {
	root := repoRoot(t)
	d, err := readDist(root)
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Images []struct {
			Name    string `yaml:"name"`
			NewName string `yaml:"newName"`
			NewTag  string `yaml:"newTag"`
			Digest  string `yaml:"digest"`
		} `yaml:"images"`
	}
	p := filepath.Join(root, "deploy/agent-gateway/kustomization.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	if len(k.Images) != 1 || k.Images[0].Name != defaultRepository || k.Images[0].NewName != "" || k.Images[0].Digest != "" {
		t.Fatalf("%s: images: %+v, want one entry for %s with newTag only", p, k.Images, defaultRepository)
	}
	if k.Images[0].NewTag != d.Version {
		t.Errorf("%s: newTag %q, builder-config.yaml dist.version is %q", p, k.Images[0].NewTag, d.Version)
	}
	// Every manifest under deploy/ that names the image (the base workloads, the operator
	// example) gives it no tag or the version.
	n := 0
	err = filepath.WalkDir(filepath.Join(root, "deploy"), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if tagRE.Match(b) {
			n++
		}
		checkTags(t, rel, string(b), d.Version)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 3 {
		t.Errorf("only %d files under deploy/ name %s; expected the kustomization, the two workloads and the operator example", n, defaultRepository)
	}
}
