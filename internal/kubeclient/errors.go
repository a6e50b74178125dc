// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package kubeclient

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// JoinErrors is what the netpulse components' Validate methods return: every problem
// found in one configuration struct, each naming its field relative to that struct.
//
// The collector's validation (confmap.Validate) calls Validate on every struct of a
// configuration and puts the struct's path in front of the error it returns, once:
// "receivers::pod_probe::icmp: count: 0 out of range [1, 100]". Joined with errors.Join,
// a second problem of the same struct would follow on a line of its own without that
// path. So JoinErrors returns a single problem as it is, and several under one header
// line, each indented on a line of its own, so that each still reads below its path:
//
//	receivers::pod_probe::icmp: 2 errors:
//	  mode: "raw"; want auto, unprivileged or privileged
//	  count: 0 out of range [1, 100]
//
// Nil errors are dropped and joined ones (errors.Join, JoinErrors) are flattened into the
// list; nil when none remains. Messages turns such an error back into one line a problem.
// It lives here because Config is the one piece of configuration every component shares,
// and its Check returns the same form.
func JoinErrors(errs ...error) error {
	var list fieldErrors
	for _, err := range errs {
		list = appendFlat(list, err)
	}
	switch len(list) {
	case 0:
		return nil
	case 1:
		return list[0]
	}
	return list
}

func appendFlat(list fieldErrors, err error) fieldErrors {
	if err == nil {
		return list
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			list = appendFlat(list, e)
		}
		return list
	}
	return append(list, err)
}

// fieldErrors are two or more problems of one configuration struct.
type fieldErrors []error

func (l fieldErrors) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d errors:", len(l))
	for _, err := range l {
		b.WriteString("\n  ")
		b.WriteString(strings.ReplaceAll(err.Error(), "\n", "\n    "))
	}
	return b.String()
}

func (l fieldErrors) Unwrap() []error { return l }

// Messages splits a validation error (confmap.Validate's, of structs whose Validate
// returns JoinErrors) into its problems, one string each with its whole path:
// "icmp: count: 0 out of range [1, 100]".
func Messages(err error) []string {
	if err == nil {
		return nil
	}
	var (
		out    []string
		prefix string
	)
	for line := range strings.SplitSeq(err.Error(), "\n") {
		switch {
		case strings.HasPrefix(line, "    ") && len(out) > 0: // continuation of a problem
			out[len(out)-1] += "\n" + strings.TrimPrefix(line, "    ")
		case strings.HasPrefix(line, "  "): // one problem of the struct named by the header
			out = append(out, prefix+strings.TrimPrefix(line, "  "))
		default:
			if path, ok := header(line); ok {
				prefix = path
				continue
			}
			prefix = ""
			out = append(out, line)
		}
	}
	return out
}

// header reports whether line is JoinErrors's header ("N errors:") after an optional path
// ("icmp: "), and returns the path with its ": ".
func header(line string) (string, bool) {
	rest, ok := strings.CutSuffix(line, " errors:")
	if !ok {
		return "", false
	}
	i := strings.LastIndex(rest, ": ") + 1
	if i > 0 {
		i++
	}
	if rest[i:] == "" || strings.Trim(rest[i:], "0123456789") != "" {
		return "", false
	}
	return rest[:i], true
}

// MatchProblems is for tests: nil when, of the problems err reports (Messages), one begins
// with each of wants and none is reported twice; otherwise an error that says what is
// missing or repeated, and lists the problems.
func MatchProblems(err error, wants ...string) error {
	if err == nil {
		return errors.New("no error; want problems")
	}
	msgs := Messages(err)
	var bad []string
	for _, want := range wants {
		if !slices.ContainsFunc(msgs, func(m string) bool { return strings.HasPrefix(m, want) }) {
			bad = append(bad, fmt.Sprintf("no problem begins with %q", want))
		}
	}
	seen := map[string]bool{}
	for _, m := range msgs {
		if seen[m] {
			bad = append(bad, fmt.Sprintf("reported twice: %q", m))
		}
		seen[m] = true
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%s\nin the problems:\n%s", strings.Join(bad, "\n"), strings.Join(msgs, "\n"))
}
