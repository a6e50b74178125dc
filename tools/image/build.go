// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// goBuildArgs are the flags of the image's binary: no cgo (a static binary that needs no
// libc in the image), no file system paths and no VCS stamp in it (the same source gives
// the same bytes on any machine with the same Go release), no symbol table or DWARF (Go
// keeps function names and lines for stack traces in its own tables). The Dockerfile
// builds through this tool too, so this is the one place these flags are written.
var goBuildArgs = []string{"build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w"}

const mainPackage = "./cmd/otelcol-netpulse"

// buildBinary cross-compiles the distribution in root (the netpulse module) for plat
// into out, and checks that the result is a static executable for that platform.
func buildBinary(ctx context.Context, root string, plat v1.Platform, out string) error {
	if plat.Variant != "" {
		return fmt.Errorf("platform %s: variants are not supported", platformString(plat))
	}
	args := append(append([]string(nil), goBuildArgs...), "-o", out, mainPackage)
	cmd := exec.CommandContext(ctx, goCommand(), args...)
	cmd.Dir = root
	// Everything that changes the output is set here, not taken from the environment
	// (GOFLAGS could add tags or -race, GOAMD64=v3 other instructions).
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+plat.OS, "GOARCH="+plat.Architecture,
		"GOFLAGS=", "GOAMD64=v1", "GOARM64=v8.0", "GOEXPERIMENT=")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s (GOOS=%s GOARCH=%s CGO_ENABLED=0): %w\n%s",
			strings.Join(args, " "), plat.OS, plat.Architecture, err, b)
	}
	return checkStaticELF(out, plat)
}

// goCommand is the go on PATH, or $GO (as the Makefile passes it).
func goCommand() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

var elfMachines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64,
	"arm64": elf.EM_AARCH64,
}

// checkStaticELF fails unless path is an ELF executable for plat with no program
// interpreter and no shared libraries: the image has no libc and no dynamic loader.
func checkStaticELF(path string, plat v1.Platform) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	want, ok := elfMachines[plat.Architecture]
	if !ok {
		return fmt.Errorf("platform %s: unsupported architecture", platformString(plat))
	}
	if f.Machine != want {
		return fmt.Errorf("%s: machine %v, want %v for %s", filepath.Base(path), f.Machine, want, platformString(plat))
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("%s: ELF type %v is not an executable", filepath.Base(path), f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s: has a program interpreter (dynamically linked; cgo on?)", filepath.Base(path))
		}
	}
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		return fmt.Errorf("%s: needs shared libraries %v", filepath.Base(path), libs)
	}
	return nil
}
