// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Command pkgmap keeps the package map of docs/development.md whole (issue #38 item 4).
// The map is the table under the heading "## Package map": one row per Go package of the
// module, its first cell the module-relative path in backquotes (`internal/contract`; the
// module's root package, if it had one, would be `.`), its second what the package is for.
// pkgmap fails when
//   - a package `go list ./...` names has no row (naming the package);
//   - a row names a package that does not exist, or a package twice;
//   - a row says nothing about its package;
//   - the "ships nothing" mark is untrue: a package that no shipped binary links (the
//     `go list -deps` of shippedBinaries) must say "ships nothing" on its row, and a
//     package a shipped binary links must not;
//   - a shipped binary links a package under testbed/, the test bed, which ships nothing
//     whatever its row says (issue #38 item 3).
//
// `make lint` runs it from the module root; it exits 1 and prints file:line: problem for
// each.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
)

const (
	module  = "github.com/netpulse/netpulse"
	docFile = "docs/development.md"
	heading = "## Package map"
	// shipsNothing marks the row of a package no shipped binary links.
	shipsNothing = "ships nothing"
	// testbed is the folder of the test harnesses: no shipped binary may link a package
	// under it.
	testbed = "testbed/"
)

// shippedBinaries are the commands netpulse ships: the collector (the image, make image)
// and the kubectl plugin (make build; docs/view.md).
var shippedBinaries = []string{"./cmd/otelcol-netpulse", "./cmd/kubectl-netpulse"}

// Problem is one untrue or missing line of the map.
type Problem struct {
	Line int // 0: the map as a whole
	Msg  string
}

func (p Problem) String() string {
	if p.Line == 0 {
		return fmt.Sprintf("%s: %s", docFile, p.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", docFile, p.Line, p.Msg)
}

// row is one package's line in the map.
type row struct {
	line       int
	pkg, about string
}

// rows reads the table under heading: the rows whose first cell is a path in backquotes.
func rows(doc []byte) ([]row, bool) {
	var out []row
	in, found := false, false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if strings.HasPrefix(l, "## ") || strings.HasPrefix(l, "# ") {
			in = strings.TrimSpace(l) == heading
			found = found || in
			continue
		}
		if !in {
			continue
		}
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), "| `")
		if !ok {
			continue
		}
		pkg, rest, ok := strings.Cut(rest, "`")
		if !ok {
			continue
		}
		// The description is the rest of the line after the first cell's bar; it may hold
		// bars of its own (in code: `matrix|why`).
		_, about, _ := strings.Cut(rest, "|")
		about = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(about), "|"))
		out = append(out, row{line: n, pkg: pkg, about: about})
	}
	return out, found
}

// Check compares the map in doc with the module's packages (module-relative paths, "." for
// the root) and the set of those a shipped binary links.
func Check(doc []byte, packages []string, shipped map[string]bool) []Problem {
	rs, found := rows(doc)
	if !found {
		return []Problem{{Msg: fmt.Sprintf("no %q section: the map of every package of the module", heading)}}
	}
	exists := map[string]bool{}
	for _, p := range packages {
		exists[p] = true
	}
	var out []Problem
	seen := map[string]int{}
	for _, r := range rs {
		switch {
		case !exists[r.pkg]:
			out = append(out, Problem{r.line, fmt.Sprintf("%s: no such package in `go list ./...` (renamed or removed? update the map)", r.pkg)})
			continue
		case seen[r.pkg] != 0:
			out = append(out, Problem{r.line, fmt.Sprintf("%s: listed again (first on line %d)", r.pkg, seen[r.pkg])})
			continue
		}
		seen[r.pkg] = r.line
		marked := strings.Contains(r.about, shipsNothing)
		switch {
		case strings.Trim(strings.ReplaceAll(r.about, shipsNothing, ""), " *_:;,.—-") == "":
			out = append(out, Problem{r.line, fmt.Sprintf("%s: say in one line what the package is for", r.pkg)})
		case !shipped[r.pkg] && !marked:
			out = append(out, Problem{r.line, fmt.Sprintf("%s: no shipped binary (%s) links it: mark it %q", r.pkg, strings.Join(shippedBinaries, ", "), shipsNothing)})
		case shipped[r.pkg] && marked:
			out = append(out, Problem{r.line, fmt.Sprintf("%s: a shipped binary (%s) links it, yet it is marked %q", r.pkg, strings.Join(shippedBinaries, ", "), shipsNothing)})
		}
	}
	var leaked []string
	for p := range shipped {
		if strings.HasPrefix(p, testbed) {
			leaked = append(leaked, p)
		}
	}
	sort.Strings(leaked)
	for _, p := range leaked {
		out = append(out, Problem{Msg: fmt.Sprintf("%s: a shipped binary (%s) links it, but %s ships nothing: move what the product needs under internal/", p, strings.Join(shippedBinaries, ", "), testbed)})
	}
	var missing []string
	for _, p := range packages {
		if seen[p] == 0 {
			missing = append(missing, p)
		}
	}
	sort.Strings(missing)
	for _, p := range missing {
		out = append(out, Problem{Msg: fmt.Sprintf("package %s is missing from the %q table: add its row (what it is for, in one line)", p, heading)})
	}
	return out
}

// relative returns an import path relative to the module ("." for its root), or false.
func relative(path string) (string, bool) {
	if path == module {
		return ".", true
	}
	return strings.CutPrefix(path, module+"/")
}

// goList runs `go list` with args and returns the module's packages it prints, relative.
func goList(goCmd string, args ...string) ([]string, error) {
	cmd := exec.Command(goCmd, append([]string{"list"}, args...)...)
	cmd.Stderr = os.Stderr
	raw, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w", strings.Join(args, " "), err)
	}
	var out []string
	for _, l := range strings.Fields(string(raw)) {
		if rel, ok := relative(l); ok {
			out = append(out, rel)
		}
	}
	return out, nil
}

func main() {
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	packages, err := goList(goCmd, "./...")
	if err != nil {
		fmt.Fprintln(os.Stderr, "pkgmap:", err)
		os.Exit(2)
	}
	deps, err := goList(goCmd, append([]string{"-deps"}, shippedBinaries...)...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pkgmap:", err)
		os.Exit(2)
	}
	shipped := map[string]bool{}
	for _, d := range deps {
		shipped[d] = true
	}
	doc, err := os.ReadFile(docFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pkgmap:", err)
		os.Exit(2)
	}
	if ps := Check(doc, packages, shipped); len(ps) > 0 {
		fmt.Fprintf(os.Stderr, "the package map of %s is not whole (hack/pkgmap):\n", docFile)
		for _, p := range ps {
			fmt.Fprintln(os.Stderr, "  "+p.String())
		}
		os.Exit(1)
	}
	fmt.Printf("pkgmap: %d packages, each on one line of %s\n", len(packages), docFile)
}
