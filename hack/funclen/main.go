// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Command funclen holds every hand-written function of the module to a budget of
// maxLines lines, from its func keyword to its closing brace (issue #38 item 3): the
// shipped code, the test bed (testbed/) and the components' harnesses alike. Tests
// (_test.go files) are not held to it, nor generated files (a "Code generated ... DO NOT
// EDIT." line), nor the separate modules under tools/.
//
// Shipped functions that were longer when the budget came are listed in overBudget with
// their length then: they may shrink, not grow, and an entry whose function is gone or
// within the budget fails too, so the list only gets shorter. Harness code has no entries.
//
// `make lint` runs it from the module root; it exits 1 and prints file:line: problem for
// each.
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"regexp"
	"sort"
	"strings"
)

// maxLines is the budget of one function, in lines.
const maxLines = 100

// overBudget: the shipped functions longer than maxLines when the budget came
// (module-relative package directory, then the function as Name or Type.Method) and their
// length then, each a ceiling.
var overBudget = map[string]int{
	"exporter/podnetworkhealthexporter.pnhExporter.registerGauges":             120,
	"exporter/podnetworkhealthexporter/internal/apply.Writer.apply":            104,
	"exporter/podnetworkhealthexporter/internal/decode.Decoder.diff":           118,
	"exporter/podnetworkhealthexporter/internal/verdict.Summarizer.summary":    102,
	"exporter/podnetworkhealthexporter/internal/verdict.Summarizer.applyRound": 117,
	"exporter/podnetworkhealthexporter/internal/verdict/quorum.Evaluate":       129,
	"exporter/podnetworkhealthexporter/internal/verdict/zones.Evaluate":        159,
	"extension/k8stokenauthextension.authenticator.authenticate":               108,
	"internal/matrix.Build":                       133,
	"receiver/podprobereceiver.emitter.emitRound": 125,
}

// Problem is one function over its budget, or a stale entry of overBudget.
type Problem struct {
	File string // "" for a stale entry
	Line int
	Msg  string
}

func (p Problem) String() string {
	if p.File == "" {
		return "hack/funclen: " + p.Msg
	}
	return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg)
}

var generatedRe = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// Held reports whether the budget holds the file at the module-relative path name.
func Held(name string, src []byte) bool {
	return strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") &&
		!strings.HasPrefix(name, "tools/") && !generatedRe.Match(src)
}

// funcName is fd's name in overBudget: Name, or Type.Method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr: // a generic receiver
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		}
		return fd.Name.Name
	}
}

// Check measures the functions of files (module-relative path → source) against the
// budget and the exceptions.
func Check(files map[string][]byte, exceptions map[string]int) ([]Problem, error) {
	var out []Problem
	seen := map[string]bool{}
	fset := token.NewFileSet()
	for name, src := range files {
		if !Held(name, src) {
			continue
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			from, to := fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line
			n := to - from + 1
			key := path.Dir(name) + "." + funcName(fd)
			ceiling, excepted := exceptions[key]
			if excepted {
				seen[key] = true
			}
			switch {
			case excepted && n <= maxLines:
				out = append(out, Problem{name, from, fmt.Sprintf("%s is %d lines, within the budget: remove its entry from overBudget", key, n)})
			case excepted && n > ceiling:
				out = append(out, Problem{name, from, fmt.Sprintf("%s grew to %d lines; it was %d when the %d-line budget came and may only shrink: split it", key, n, ceiling, maxLines)})
			case !excepted && n > maxLines:
				out = append(out, Problem{name, from, fmt.Sprintf("%s is %d lines, over the %d-line budget: split it into named steps", key, n, maxLines)})
			}
		}
	}
	for key := range exceptions {
		if !seen[key] {
			out = append(out, Problem{Msg: fmt.Sprintf("overBudget names %s, which no longer exists: remove its entry", key)})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].File != out[j].File {
			return out[i].File < out[j].File
		}
		if out[i].Line != out[j].Line {
			return out[i].Line < out[j].Line
		}
		return out[i].Msg < out[j].Msg
	})
	return out, nil
}

func main() {
	raw, err := exec.Command("git", "ls-files", "*.go").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "funclen: git ls-files:", err)
		os.Exit(2)
	}
	files := map[string][]byte{}
	for _, name := range strings.Fields(string(bytes.TrimSpace(raw))) {
		src, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "funclen:", err)
			os.Exit(2)
		}
		files[name] = src
	}
	ps, err := Check(files, overBudget)
	if err != nil {
		fmt.Fprintln(os.Stderr, "funclen:", err)
		os.Exit(2)
	}
	if len(ps) > 0 {
		fmt.Fprintf(os.Stderr, "functions over the %d-line budget (hack/funclen):\n", maxLines)
		for _, p := range ps {
			fmt.Fprintln(os.Stderr, "  "+p.String())
		}
		os.Exit(1)
	}
	fmt.Printf("funclen: %d Go files, every function within %d lines or its recorded length\n", len(files), maxLines)
}
