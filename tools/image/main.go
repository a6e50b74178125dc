// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Command image builds the otelcol-netpulse container image without a Docker daemon: a
// multi-platform OCI image (linux/amd64, linux/arm64) written as one tar file that
// `docker load`, `kind load image-archive` and `ctr images import` accept. It is a separate
// module (github.com/netpulse/netpulse/tools/image) so that go-containerregistry stays out
// of the main go.mod. See docs/image.md.
//
//	image build  [-root DIR] [-platforms linux/amd64,linux/arm64] [-o FILE]   (make image)
//	image rootfs [-root DIR] -platform linux/ARCH -o DIR                     (the Dockerfile)
//	image version [-root DIR]
//	image helper -bin FILE -ref NAME:TAG -entrypoint /PATH -o FILE   (the real-node cluster's pause and CoreDNS)
//
// The image is reproducible: its digest depends only on the binaries (static, built with
// fixed flags), on builder-config.yaml's dist section and on $SOURCE_DATE_EPOCH (the
// time in the image, 0 when unset).
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: image build|rootfs|version [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	root := fs.String("root", "../..", "the netpulse repository (where builder-config.yaml is)")
	switch args[0] {
	case "build":
		platforms := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated platforms")
		out := fs.String("o", "otelcol-netpulse-image.tar", "the archive to write")
		repo := fs.String("repository", defaultRepository, "the image's name without the tag")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		created, err := sourceDateEpoch()
		if err != nil {
			return err
		}
		var plats []v1.Platform
		for _, s := range strings.Split(*platforms, ",") {
			p, err := parsePlatform(strings.TrimSpace(s))
			if err != nil {
				return err
			}
			plats = append(plats, p)
		}
		res, err := buildArchive(ctx, buildOptions{root: *root, platforms: plats, out: *out, repository: *repo, created: created, log: stdout})
		if err != nil {
			return err
		}
		res.print(stdout)
		return nil
	case "rootfs":
		platform := fs.String("platform", "", "linux/amd64 or linux/arm64")
		out := fs.String("o", "", "the directory to write the image's files into")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		p, err := parsePlatform(*platform)
		if err != nil {
			return err
		}
		if *out == "" {
			return errors.New("rootfs: -o DIR is required")
		}
		bin := filepath.Join(*out, filepath.FromSlash(strings.TrimPrefix(entrypoint, "/")))
		if err := writeTree(*out, baseFiles()); err != nil {
			return err
		}
		if err := buildBinary(ctx, *root, p, bin); err != nil {
			return err
		}
		return os.Chmod(bin, 0o755)
	case "helper":
		bin := fs.String("bin", "", "a static binary built elsewhere")
		ref := fs.String("ref", "", "the image's name, e.g. registry.k8s.io/pause:3.10.2")
		ep := fs.String("entrypoint", "", "where the binary goes in the image (absolute)")
		user := fs.String("user", "65532", "the user the image runs as")
		platform := fs.String("platform", "linux/amd64", "the binary's platform")
		out := fs.String("o", "", "the archive to write")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return helperImage(*bin, *ref, *ep, *user, *platform, *out, fs.Args())
	case "version":
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		d, err := readDist(*root)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, d.Version)
		return nil
	}
	return fmt.Errorf("unknown command %q: want build, rootfs, helper or version", args[0])
}

// sourceDateEpoch is the image's time: $SOURCE_DATE_EPOCH (reproducible-builds.org), or
// the Unix epoch when it is not set.
func sourceDateEpoch() (time.Time, error) {
	v := os.Getenv("SOURCE_DATE_EPOCH")
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since the epoch", v)
	}
	return time.Unix(n, 0).UTC(), nil
}

type buildOptions struct {
	root       string
	platforms  []v1.Platform
	out        string
	repository string
	created    time.Time
	log        io.Writer // progress lines; nil for none
}

type buildResult struct {
	path      string
	reference string
	index     v1.Hash            // the multi-platform image index: the image's digest
	manifests map[string]v1.Hash // per platform
	platforms []string
	sha256    string // of the archive file
	size      int64
}

func (r *buildResult) print(w io.Writer) {
	fmt.Fprintf(w, "%s: %s (%.1f MB, file sha256:%s)\n", r.path, r.reference, float64(r.size)/1e6, r.sha256)
	fmt.Fprintf(w, "  image index  %s\n", r.index)
	for _, p := range r.platforms {
		fmt.Fprintf(w, "  %-12s %s\n", p, r.manifests[p])
	}
}

// buildArchive builds the binaries, assembles the image and writes the archive.
func buildArchive(ctx context.Context, o buildOptions) (*buildResult, error) {
	logf := func(format string, args ...any) {
		if o.log != nil {
			fmt.Fprintf(o.log, format+"\n", args...)
		}
	}
	root, err := filepath.Abs(o.root)
	if err != nil {
		return nil, err
	}
	d, err := readDist(root)
	if err != nil {
		return nil, err
	}
	s := spec{dist: d, repository: o.repository, created: o.created}
	if s.repository == "" {
		s.repository = defaultRepository
	}
	tmp, err := os.MkdirTemp("", "netpulse-image-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var bins []platformBinary
	for _, p := range o.platforms {
		start := time.Now()
		out := filepath.Join(tmp, "otelcol-netpulse-"+p.Architecture)
		if err := buildBinary(ctx, root, p, out); err != nil {
			return nil, err
		}
		b, err := os.ReadFile(out)
		if err != nil {
			return nil, err
		}
		logf("built %s for %s (%.1f MB) in %s", mainPackage, platformString(p), float64(len(b))/1e6, time.Since(start).Round(100*time.Millisecond))
		bins = append(bins, platformBinary{platform: p, binary: b})
	}
	start := time.Now()
	b, err := assemble(s, bins)
	if err != nil {
		return nil, err
	}
	outPath, err := filepath.Abs(o.out)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(outPath), 0o755); err != nil {
		return nil, err
	}
	if err := writeArchive(outPath, s, b); err != nil {
		return nil, err
	}
	logf("assembled and wrote the archive in %s", time.Since(start).Round(100*time.Millisecond))
	res := &buildResult{path: o.out, reference: s.reference(), manifests: map[string]v1.Hash{}}
	if res.index, err = b.index.Digest(); err != nil {
		return nil, err
	}
	for i, img := range b.images {
		h, err := img.Digest()
		if err != nil {
			return nil, err
		}
		ps := platformString(bins[i].platform)
		res.manifests[ps] = h
		res.platforms = append(res.platforms, ps)
	}
	f, err := os.Open(outPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if res.size, err = io.Copy(h, f); err != nil {
		return nil, err
	}
	res.sha256 = hex.EncodeToString(h.Sum(nil))
	return res, nil
}
