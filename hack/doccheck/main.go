// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Command doccheck keeps the Markdown docs true to the tree (issue #38 item 5). For every
// *.md file git tracks (or would: untracked, not ignored) it checks that
//   - every relative link and reference definition names a file or directory that exists,
//     and its #anchor a heading (GitHub's anchor rules) or an <a id|name> of the target;
//   - every metric name written in it exists: `otelcol_*` as the collector's internal
//     telemetry names the components' telemetry metrics (their metadata.yaml, and the
//     collector's own helpers' metadata.yaml for otelcol_receiver_*, otelcol_exporter_*...:
//     otelcol_ + name, dots as underscores, no unit or _total suffix, _bucket/_sum/_count
//     for histograms), `netpulse_probe_*` as the prometheus exporter names pod_probe's
//     metrics (unit suffix, _total on monotonic sums) or labels its attributes, and
//     `netpulse.probe.*` as metadata.yaml and internal/contract name metrics and attributes;
//   - every chart value named in inline code (`gateway.shards`, `--set probe.k=5`) exists in
//     deploy/helm/netpulse/values.yaml (below a free-form map such as agent.config,
//     anything goes);
//   - every `make <target>` in code names a target of the Makefile, and every repo path
//     (a word beginning with one of the repository's top-level directories) exists,
//     relative to the repository or to the file.
//
// `make lint` runs it from the module root; it exits 1 and prints file:line: problem for
// each. A metric name followed by * is a prefix (otelcol_pod_probe_*).
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/netpulse/netpulse/internal/contract"
)

// Problem is one untrue statement in a doc.
type Problem struct {
	File string // relative to the root
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

// Known is what the docs may name.
type Known struct {
	Metrics     map[string]bool // otelcol_*, netpulse_probe_* and netpulse.probe.* names
	MakeTargets map[string]bool
	Values      map[string]any // values.yaml, parsed
	TopDirs     map[string]bool
	// Components are the component directories (receiver/podprobereceiver, ...): a path
	// may be relative to one (internal/plan, docs/engine.md).
	Components []string
}

// collectorMetadataModules are the collector modules whose internal telemetry the docs
// may name (otelcol_receiver_accepted_metric_points, otelcol_exporter_queue_size, ...).
var collectorMetadataModules = []string{
	"go.opentelemetry.io/collector/service",
	"go.opentelemetry.io/collector/receiver/receiverhelper",
	"go.opentelemetry.io/collector/exporter/exporterhelper",
	"go.opentelemetry.io/collector/processor/processorhelper",
	"go.opentelemetry.io/collector/processor/batchprocessor",
	"go.opentelemetry.io/collector/processor/memorylimiterprocessor",
}

// pmetricMetrics are pod_probe metrics built with pmetric directly (mdatagen's metrics:
// has no histograms), so not in its metadata.yaml: name → Prometheus base name and kind.
var pmetricMetrics = map[string]struct {
	prom      string
	histogram bool
}{
	contract.MetricDuration: {"netpulse_probe_duration_seconds", true},
	contract.MetricRounds:   {"netpulse_probe_rounds_total", false},
}

type metadata struct {
	Attributes         map[string]any `yaml:"attributes"`
	ResourceAttributes map[string]any `yaml:"resource_attributes"`
	Metrics            map[string]mdMetric
	Telemetry          struct {
		Metrics map[string]mdMetric `yaml:"metrics"`
	} `yaml:"telemetry"`
}

type mdMetric struct {
	Unit      string                    `yaml:"unit"`
	Sum       *struct{ Monotonic bool } `yaml:"sum"`
	Gauge     map[string]any            `yaml:"gauge"`
	Histogram map[string]any            `yaml:"histogram"`
}

var unitSuffix = map[string]string{"s": "seconds", "ms": "milliseconds", "By": "bytes", "KiBy": "kibibytes", "MiBy": "mebibytes"}

// promName is the prometheus exporter's name of a pipeline metric.
func promName(name string, m mdMetric) string {
	n := strings.ReplaceAll(name, ".", "_")
	if s, ok := unitSuffix[m.Unit]; ok && !strings.HasSuffix(n, "_"+s) {
		n += "_" + s
	}
	if m.Unit == "1" && m.Gauge != nil && !strings.HasSuffix(n, "_ratio") {
		n += "_ratio"
	}
	if m.Sum != nil && m.Sum.Monotonic {
		n += "_total"
	}
	return n
}

// addMetadata adds the names one metadata.yaml defines.
func (k *Known) addMetadata(raw []byte) error {
	var md metadata
	if err := yaml.Unmarshal(raw, &md); err != nil {
		return err
	}
	for name, m := range md.Telemetry.Metrics {
		base := "otelcol_" + strings.ReplaceAll(name, ".", "_")
		k.Metrics[base] = true
		if m.Histogram != nil {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				k.Metrics[base+s] = true
			}
		}
	}
	for name, m := range md.Metrics {
		k.Metrics[name] = true
		k.Metrics[promName(name, m)] = true
	}
	for name := range md.Attributes {
		k.Metrics[name] = true
		k.Metrics[strings.ReplaceAll(name, ".", "_")] = true
	}
	for name := range md.ResourceAttributes {
		k.Metrics[name] = true
	}
	return nil
}

// Load reads what the docs may name from the repository at root; modDirs are the
// directories of collectorMetadataModules (nil: asked of `go list -m`).
func Load(root string, modDirs []string) (*Known, error) {
	k := &Known{Metrics: map[string]bool{}, MakeTargets: map[string]bool{}, TopDirs: map[string]bool{}}
	mds, _ := filepath.Glob(filepath.Join(root, "*", "*", "metadata.yaml"))
	for _, d := range modDirs {
		mds = append(mds, filepath.Join(d, "metadata.yaml"))
	}
	for _, f := range mds[:len(mds)-len(modDirs)] {
		rel, _ := filepath.Rel(root, filepath.Dir(f))
		k.Components = append(k.Components, filepath.ToSlash(rel))
	}
	for _, f := range mds {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if err := k.addMetadata(raw); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	for name, m := range pmetricMetrics {
		k.Metrics[name] = true
		k.Metrics[m.prom] = true
		if m.histogram {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				k.Metrics[m.prom+s] = true
			}
		}
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return nil, err
	}
	target := regexp.MustCompile(`^([A-Za-z0-9_.-]+)\s*:([^=]|$)`)
	for _, line := range strings.Split(string(mk), "\n") {
		if m := target.FindStringSubmatch(line); m != nil {
			k.MakeTargets[m[1]] = true
		}
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "helm", "netpulse", "values.yaml"))
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(raw, &k.Values); err != nil {
		return nil, fmt.Errorf("values.yaml: %w", err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && e.Name() != "bin" && e.Name() != "_build" {
			k.TopDirs[e.Name()] = true
		}
	}
	return k, nil
}

// Doc is one Markdown file.
type Doc struct {
	Path  string // relative to the root, slash-separated
	Text  string
	prose string // Text with fenced blocks blanked (same offsets)
	lines []int  // offsets of line starts
}

func newDoc(path, text string) *Doc {
	d := &Doc{Path: path, Text: text}
	b := []byte(text)
	fence := ""
	off := 0
	for _, line := range strings.SplitAfter(text, "\n") {
		d.lines = append(d.lines, off)
		t := strings.TrimSpace(line)
		in := fence != ""
		switch {
		case fence == "" && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")):
			fence = t[:3]
			in = true
		case fence != "" && strings.HasPrefix(t, fence):
			fence = ""
		}
		if in {
			for i := off; i < off+len(line); i++ {
				if b[i] != '\n' {
					b[i] = ' '
				}
			}
		}
		off += len(line)
	}
	d.prose = string(b)
	return d
}

func (d *Doc) line(off int) int { return sort.SearchInts(d.lines, off+1) }

// fenced returns the fenced blocks' text (everything prose blanked).
func (d *Doc) fenced() string {
	b := []byte(d.Text)
	for i := range b {
		if d.prose[i] != ' ' || b[i] == ' ' {
			if b[i] != '\n' {
				b[i] = ' '
			}
		}
	}
	return string(b)
}

var (
	codeSpan  = regexp.MustCompile("`([^`]+)`")
	inlineURL = regexp.MustCompile(`!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDef    = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	htmlAttr  = regexp.MustCompile(`<(?:a|img)\s[^>]*?(?:href|src)="([^"]+)"`)
	htmlID    = regexp.MustCompile(`<a\s[^>]*?(?:id|name)="([^"]+)"`)
	heading   = regexp.MustCompile(`(?m)^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$`)
	metricRe  = regexp.MustCompile(`(?:^|[^A-Za-z0-9_.])((?:otelcol_|netpulse_probe_)[a-z0-9_]*[a-z0-9_]|netpulse\.probe\.[a-z0-9_.]*[a-z0-9_])(\*?)`)
	valueRe   = regexp.MustCompile(`^(?:--set(?:-string|-json)?[ =])?([a-z][A-Za-z0-9]*(?:\.[A-Za-z][A-Za-z0-9]*)+)(?:[=\[].*)?$`)
	setRe     = regexp.MustCompile(`--set(?:-string|-json)?[ =]([A-Za-z0-9.]+)=`)
	makeRe    = regexp.MustCompile(`(?m)^[ \t]*(?:\$[ \t]+)?(?:sudo[ \t]+)?(?:[A-Z_]+=\S+[ \t]+)*make((?:[ \t]+[a-z][a-z0-9_-]*)+)`)
	ignoreRe  = regexp.MustCompile(`<!--\s*doccheck:ignore\s+(.+?)\s*-->`)
	symbolRe  = regexp.MustCompile(`\.[A-Z][A-Za-z0-9_]*$`)
	pathRe    = regexp.MustCompile(`(?:^|[\s(\x60'"=:,\[])(?:\./)?([A-Za-z0-9_][A-Za-z0-9_.-]*/[A-Za-z0-9_./-]*[A-Za-z0-9_/])`)
)

// blankCode returns s with inline code spans blanked (same offsets).
func blankCode(s string) string {
	return codeSpan.ReplaceAllStringFunc(s, func(m string) string { return strings.Repeat(" ", len(m)) })
}

// Anchors returns the anchors GitHub gives the headings of d (and its <a id|name>).
func Anchors(d *Doc) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(d.prose, -1) {
		s := Slug(m[2])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	for _, m := range htmlID.FindAllStringSubmatch(d.Text, -1) {
		out[m[1]] = true
	}
	return out
}

var (
	mdLink  = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag = regexp.MustCompile(`<[^>]+>`)
)

// Slug is GitHub's anchor of a heading's text: its rendered text lower-cased, every
// character but letters, digits, spaces, hyphens and underscores dropped, spaces as
// hyphens.
func Slug(h string) string {
	h = mdLink.ReplaceAllString(h, "$1")
	h = htmlTag.ReplaceAllString(h, "")
	h = strings.ReplaceAll(h, "`", "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// Checker checks docs against a repository.
type Checker struct {
	Root    string
	Known   *Known
	Docs    map[string]*Doc // by slash path relative to Root
	anchors map[string]map[string]bool
}

func (c *Checker) anchorsOf(path string) (map[string]bool, bool) {
	if a, ok := c.anchors[path]; ok {
		return a, true
	}
	d, ok := c.Docs[path]
	if !ok {
		raw, err := os.ReadFile(filepath.Join(c.Root, filepath.FromSlash(path)))
		if err != nil {
			return nil, false
		}
		d = newDoc(path, string(raw))
	}
	a := Anchors(d)
	if c.anchors == nil {
		c.anchors = map[string]map[string]bool{}
	}
	c.anchors[path] = a
	return a, true
}

func (c *Checker) exists(rel string) bool {
	_, err := os.Stat(filepath.Join(c.Root, filepath.FromSlash(rel)))
	return err == nil
}

// Check returns the problems of every doc, sorted.
func (c *Checker) Check() []Problem {
	var out []Problem
	paths := make([]string, 0, len(c.Docs))
	for p := range c.Docs {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		d := c.Docs[p]
		add := func(off int, f string, a ...any) {
			out = append(out, Problem{File: p, Line: d.line(off), Msg: fmt.Sprintf(f, a...)})
		}
		c.checkLinks(d, add)
		c.checkMetrics(d, add)
		c.checkCode(d, add)
	}
	return out
}

func (c *Checker) checkLinks(d *Doc, add func(int, string, ...any)) {
	prose := blankCode(d.prose)
	var targets [][2]int
	for _, m := range inlineURL.FindAllStringSubmatchIndex(prose, -1) {
		targets = append(targets, [2]int{m[4], m[5]})
	}
	for _, re := range []*regexp.Regexp{refDef, htmlAttr} {
		for _, m := range re.FindAllStringSubmatchIndex(prose, -1) {
			targets = append(targets, [2]int{m[2], m[3]})
		}
	}
	for _, t := range targets {
		target := prose[t[0]:t[1]]
		if target == ">" || target == "<>" {
			continue // mdatagen's [comment]: <> (...)
		}
		if strings.Contains(target, ":") && !strings.HasPrefix(target, "#") {
			continue // a URL (https:, mailto:)
		}
		file, frag, _ := strings.Cut(target, "#")
		resolved := d.Path
		if file != "" {
			if strings.HasPrefix(file, "/") {
				resolved = strings.TrimPrefix(file, "/")
			} else {
				resolved = filepath.ToSlash(filepath.Join(filepath.Dir(d.Path), file))
			}
			if strings.HasPrefix(resolved, "../") || !c.exists(resolved) {
				add(t[0], "link %s: %s does not exist", target, resolved)
				continue
			}
		}
		if frag == "" || !strings.HasSuffix(resolved, ".md") {
			continue
		}
		anchors, ok := c.anchorsOf(resolved)
		if ok && !anchors[strings.ToLower(frag)] {
			add(t[0], "link %s: %s has no heading with anchor #%s", target, resolved, frag)
		}
	}
}

func (c *Checker) checkMetrics(d *Doc, add func(int, string, ...any)) {
	for _, m := range metricRe.FindAllStringSubmatchIndex(d.Text, -1) {
		name := d.Text[m[2]:m[3]]
		if m[5] > m[4] || strings.HasSuffix(name, "_") || strings.HasSuffix(name, ".") { // a prefix
			found := false
			for k := range c.Known.Metrics {
				if strings.HasPrefix(k, name) {
					found = true
					break
				}
			}
			if !found {
				add(m[2], "no metric begins with %s", name)
			}
			continue
		}
		if c.Known.Metrics[name] {
			continue
		}
		add(m[2], "metric %s exists in no metadata.yaml (nor as the collector names it)", name)
	}
}

// code returns the inline code spans of d's prose and d's fenced blocks, with offsets.
func code(d *Doc) (spans [][3]int, fenced string) {
	for _, m := range codeSpan.FindAllStringSubmatchIndex(d.prose, -1) {
		spans = append(spans, [3]int{m[2], m[3], 0})
	}
	return spans, d.fenced()
}

func (c *Checker) checkCode(d *Doc, add func(int, string, ...any)) {
	ignored := map[string]bool{}
	for _, m := range ignoreRe.FindAllStringSubmatch(d.Text, -1) {
		for _, w := range strings.Fields(m[1]) {
			ignored[w] = true
		}
	}
	spans, fenced := code(d)
	for _, s := range spans {
		text := d.Text[s[0]:s[1]]
		if m := valueRe.FindStringSubmatch(strings.TrimSpace(text)); m != nil && !ignored[m[1]] {
			if msg := c.valueProblem(m[1]); msg != "" {
				add(s[0], "%s", msg)
			}
		}
	}
	for _, m := range setRe.FindAllStringSubmatchIndex(d.Text, -1) {
		if ignored[d.Text[m[2]:m[3]]] {
			continue
		}
		if msg := c.valueProblem(d.Text[m[2]:m[3]]); msg != "" {
			add(m[2], "%s", msg)
		}
	}
	checkMake := func(text string, base int) {
		for _, m := range makeRe.FindAllStringSubmatchIndex(text, -1) {
			for _, t := range strings.Fields(text[m[2]:m[3]]) {
				if !c.Known.MakeTargets[t] && !ignored[t] {
					add(base+m[2], "make %s: no such target in the Makefile", t)
				}
			}
		}
	}
	for _, s := range spans {
		checkMake(d.Text[s[0]:s[1]], s[0])
	}
	checkMake(fenced, 0)
	// Paths: in prose, inline code and fenced blocks alike.
	for _, m := range pathRe.FindAllStringSubmatchIndex(blankURLs(d.Text), -1) {
		p := d.Text[m[2]:m[3]]
		if ignored[p] {
			continue
		}
		if msg := c.pathProblem(d, p); msg != "" {
			add(m[2], "%s", msg)
		}
	}
}

var kubectlRef = regexp.MustCompile(`^deploy/netpulse-[a-z0-9-]+$`)

var urlRe = regexp.MustCompile(`[a-z]+://\S+|\b[a-z0-9.-]+\.(?:com|io|org|net|dev|sh|k8s\.io)/\S*`)

// blankURLs blanks URLs and host/path words (github.com/..., sigs.k8s.io/...).
func blankURLs(s string) string {
	return urlRe.ReplaceAllStringFunc(s, func(m string) string { return strings.Repeat(" ", len(m)) })
}

// valueProblem says what is wrong with a chart value path, or "" when it exists or is not
// a chart value (its first key is none of values.yaml's, or it names a file: agent.yaml).
func (c *Checker) valueProblem(path string) string {
	keys := strings.Split(path, ".")
	if _, ok := c.Known.Values[keys[0]]; !ok {
		return ""
	}
	switch keys[len(keys)-1] {
	case "yaml", "yml", "json", "md", "crt", "key", "go", "tpl", "txt", "sh", "tar":
		return ""
	}
	var node any = c.Known.Values
	for i, k := range keys {
		m, ok := node.(map[string]any)
		if !ok {
			return fmt.Sprintf("chart value %s: %s is not a map in values.yaml", path, strings.Join(keys[:i], "."))
		}
		if len(m) == 0 {
			return "" // free-form (agent.config, labels, ...)
		}
		v, ok := m[k]
		if !ok {
			return fmt.Sprintf("chart value %s: values.yaml has no %s", path, strings.Join(keys[:i+1], "."))
		}
		if i == len(keys)-1 {
			return ""
		}
		if v == nil {
			return "" // null default of a free-form value
		}
		node = v
	}
	return ""
}

// pathProblem says what is wrong with a repository path named in d, or "".
func (c *Checker) pathProblem(d *Doc, p string) string {
	if kubectlRef.MatchString(p) {
		return "" // kubectl's <kind>/<name>: deploy/netpulse-gateway
	}
	top, _, _ := strings.Cut(p, "/")
	if !c.Known.TopDirs[top] {
		return ""
	}
	p = strings.TrimSuffix(p, "/...")
	p = symbolRe.ReplaceAllString(p, "") // testbed/testpki.WriteServing
	p = strings.TrimRight(p, "./")
	if c.exists(p) {
		return ""
	}
	for dir := path.Dir(d.Path); dir != "."; dir = path.Dir(dir) {
		if c.exists(path.Join(dir, p)) {
			return ""
		}
	}
	for _, comp := range c.Known.Components {
		if c.exists(path.Join(comp, p)) {
			return ""
		}
	}
	return fmt.Sprintf("path %s does not exist (relative to the repository, the file or a component)", p)
}

// markdownFiles lists the *.md files git tracks or would track under root.
func markdownFiles(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "*.md")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	raw, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		f := sc.Text()
		if f == "" || seen[f] {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			continue // deleted in the work tree
		}
		seen[f] = true
		out = append(out, f)
	}
	return out, sc.Err()
}

// moduleDirs asks go list where the collector modules are.
func moduleDirs(goCmd string) ([]string, error) {
	args := append([]string{"list", "-m", "-f", "{{.Dir}}"}, collectorMetadataModules...)
	cmd := exec.Command(goCmd, args...)
	cmd.Stderr = os.Stderr
	raw, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(raw)), nil
}

// New loads the docs and what they may name from root.
func New(root string, files []string, modDirs []string) (*Checker, error) {
	k, err := Load(root, modDirs)
	if err != nil {
		return nil, err
	}
	c := &Checker{Root: root, Known: k, Docs: map[string]*Doc{}}
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		c.Docs[filepath.ToSlash(f)] = newDoc(filepath.ToSlash(f), string(raw))
	}
	return c, nil
}

func main() {
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	dirs, err := moduleDirs(goCmd)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doccheck: go list -m:", err)
		os.Exit(2)
	}
	files, err := markdownFiles(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "doccheck: git ls-files:", err)
		os.Exit(2)
	}
	c, err := New(".", files, dirs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doccheck:", err)
		os.Exit(2)
	}
	if ps := c.Check(); len(ps) > 0 {
		fmt.Fprintln(os.Stderr, "docs name what does not exist (hack/doccheck):")
		for _, p := range ps {
			fmt.Fprintln(os.Stderr, "  "+p.String())
		}
		os.Exit(1)
	}
	fmt.Printf("doccheck: %d Markdown files: links, anchors, metrics, chart values, make targets and paths resolve\n", len(files))
}
