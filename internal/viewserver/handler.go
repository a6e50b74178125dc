// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package viewserver

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/netpulse/netpulse/internal/livematrix"
	"github.com/netpulse/netpulse/internal/matrix"
)

//go:embed web
var webFS embed.FS

// HandlerOptions configure the HTTP handler.
type HandlerOptions struct {
	// RefreshInterval is how often the page polls (default 2s).
	RefreshInterval time.Duration
	// MaxMatrixNodes bounds a node x node matrix (default 150): larger selections are
	// refused with 413, and the page starts on the zone x zone view instead.
	MaxMatrixNodes int
	// Clock (default time.Now) for "since" texts.
	Clock func() time.Time
	// AllowedHosts are the host names (besides IP literals and localhost) the server
	// answers to; a request with another Host header gets 421 (DNS-rebinding defence,
	// hosts.go). Entries are names or "*.domain", no port.
	AllowedHosts []string
	// OnMisdirected, when set, is called with the Host header of each request refused
	// for it (to count or log it).
	OnMisdirected func(host string)
	// Live (optional) fills the matrix cells without an object with the gateway's newest
	// probe result (the netpulse_view extension passes its livematrix.Reader). Without
	// it every answer says NoLive.
	Live LiveCells
	// NoLive is why there are no live cells when Live is nil (default NoLiveDefault).
	NoLive string
}

// LiveCells is the gateway's newest result per observer and target node.
type LiveCells interface {
	Status() livematrix.Status
	Row(observer string, now time.Time) []livematrix.Result
}

// NoLiveDefault is HandlerOptions.NoLive's default.
const NoLiveDefault = "no live data: this server reads the API only (objects), not the gateway's memory"

// Defaults of HandlerOptions.
const (
	DefaultRefreshInterval = 2 * time.Second
	DefaultMaxMatrixNodes  = 150
	// MaxTop bounds /api/v1/top?n=.
	MaxTop = 500
)

type handler struct {
	src    Snapshotter
	opts   HandlerOptions
	mux    *http.ServeMux
	assets map[string]asset
}

type asset struct {
	body        []byte
	contentType string
	etag        string
}

// NewHandler serves the page and its JSON API (every route is read-only: GET and HEAD):
//
//	/                              the page (index.html, app.js, style.css: embedded)
//	/api/v1/zones                  the zone x zone summary, the node problems, the counts
//	/api/v1/matrix?zone=a&zone=b   the node x node matrix of those zones (all: no zone=)
//	/api/v1/matrix?from=a&to=b     rows: zone a's nodes, columns: zone b's (a zone cell)
//	/api/v1/pair?observer=n&target=m  the objects of one cell, with probes and outages
//	/api/v1/node/<name>            why a node reads as it does
//	/api/v1/target/<ns>/<name>     why a pod target reads as it does
//	/api/v1/top?n=20               the worst pairs by loss, then RTT
//
// The zones and matrix answers carry an ETag that changes with the informers' state;
// a poll with If-None-Match gets 304 Not Modified while nothing changed.
func NewHandler(src Snapshotter, opts HandlerOptions) (http.Handler, error) {
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = DefaultRefreshInterval
	}
	if opts.MaxMatrixNodes <= 0 {
		opts.MaxMatrixNodes = DefaultMaxMatrixNodes
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.NoLive == "" {
		opts.NoLive = NoLiveDefault
	}
	if err := ValidateAllowedHosts(opts.AllowedHosts); err != nil {
		return nil, fmt.Errorf("allowed hosts: %w", err)
	}
	h := &handler{src: src, opts: opts, mux: http.NewServeMux(), assets: map[string]asset{}}
	sub, err := fs.Sub(webFS, "web")
	if err != nil {
		return nil, err
	}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		h.assets["/"+p] = asset{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		return nil, err
	}
	h.assets["/"] = h.assets["/index.html"]
	h.mux.HandleFunc("GET /api/v1/zones", h.zones)
	h.mux.HandleFunc("GET /api/v1/matrix", h.matrix)
	h.mux.HandleFunc("GET /api/v1/pair", h.pair)
	h.mux.HandleFunc("GET /api/v1/node/{name}", h.node)
	h.mux.HandleFunc("GET /api/v1/target/{namespace}/{name}", h.target)
	h.mux.HandleFunc("GET /api/v1/top", h.top)
	h.mux.HandleFunc("GET /api/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint")
	})
	h.mux.HandleFunc("GET /", h.static)
	return h, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	// A read-only page of its own: no framing, no third-party anything, no referrer.
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	if !HostAllowed(r.Host, h.opts.AllowedHosts) {
		if h.opts.OnMisdirected != nil {
			h.opts.OnMisdirected(r.Host)
		}
		writeError(w, http.StatusMisdirectedRequest, "this server does not answer to that Host name (DNS-rebinding defence): use localhost or an IP address, or add the name to the allowed hosts")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "read-only: GET and HEAD only")
		return
	}
	h.mux.ServeHTTP(w, r)
}

func (h *handler) static(w http.ResponseWriter, r *http.Request) {
	a, ok := h.assets[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("ETag", a.etag)
	w.Header().Set("Cache-Control", "no-cache")
	if r.Header.Get("If-None-Match") == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	_, _ = w.Write(a.body)
}

// snapshot answers 503 while the informers have not listed yet.
func (h *handler) snapshot(w http.ResponseWriter) (*matrix.Model, uint64, bool) {
	m, v, ok := h.src.Snapshot()
	if !ok {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "waiting for the first LIST of PodNetworkHealth objects, nodes and agent pods")
		return nil, 0, false
	}
	return m, v, true
}

// at is the model with "now" moved to the request's time, for texts with ages.
func (h *handler) at(m *matrix.Model) *matrix.Model {
	mm := *m
	mm.Now = h.opts.Clock()
	return &mm
}

// liveStatus says whether and why the answers carry live cells.
func (h *handler) liveStatus() livematrix.Status {
	if h.opts.Live == nil {
		return livematrix.Status{State: livematrix.StateUnavailable, Message: h.opts.NoLive}
	}
	return h.opts.Live.Status()
}

// liveTag tells apart the states of the live cells in an ETag.
func liveTag(st livematrix.Status) string { return fmt.Sprintf("/live-%s-%d", st.State, st.Version) }

// liveRow is the live cells of an observer, none unless they are the cluster's.
func (h *handler) liveRow(st livematrix.Status, now time.Time) func(string) []livematrix.Result {
	return func(observer string) []livematrix.Result {
		if st.State != livematrix.StateLive {
			return nil
		}
		return h.opts.Live.Row(observer, now)
	}
}

// ZonesResponse is /api/v1/zones.
type ZonesResponse struct {
	matrix.Summary
	Version        uint64  `json:"version"`
	RefreshSeconds float64 `json:"refreshSeconds"`
	MaxMatrixNodes int     `json:"maxMatrixNodes"`
	// Live says whether the node matrices carry live cells, and why not.
	Live livematrix.Status `json:"live"`
}

func (h *handler) zones(w http.ResponseWriter, r *http.Request) {
	m, v, ok := h.snapshot(w)
	live := h.liveStatus()
	if !ok || notModified(w, r, v, "zones"+liveTag(live)) {
		return
	}
	writeJSON(w, http.StatusOK, ZonesResponse{Summary: m.Summary(), Version: v,
		RefreshSeconds: h.opts.RefreshInterval.Seconds(), MaxMatrixNodes: h.opts.MaxMatrixNodes, Live: live})
}

// MatrixResponse is /api/v1/matrix.
type MatrixResponse struct {
	matrix.Matrix
	Version uint64 `json:"version"`
	// Live says whether the cells carry live results; LiveCells counts the cells only a
	// live result fills (no object).
	Live      livematrix.Status `json:"live"`
	LiveCells int               `json:"liveCells"`
}

func (h *handler) matrix(w http.ResponseWriter, r *http.Request) {
	m, v, ok := h.snapshot(w)
	live := h.liveStatus()
	if !ok || notModified(w, r, v, "matrix?"+r.URL.RawQuery+liveTag(live)) {
		return
	}
	q := r.URL.Query()
	var mx matrix.Matrix
	var err error
	if _, cross := q["from"]; cross {
		mx, err = m.CrossMatrix(q["from"], q["to"], h.opts.MaxMatrixNodes)
	} else {
		mx, err = m.Matrix(q["zone"], h.opts.MaxMatrixNodes)
	}
	var tooLarge matrix.ErrTooLarge
	if errors.As(err, &tooLarge) {
		writeError(w, http.StatusRequestEntityTooLarge, err.Error())
		return
	} else if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	added := mx.AddLive(h.liveRow(live, h.opts.Clock()))
	writeJSON(w, http.StatusOK, MatrixResponse{Matrix: mx, Version: v, Live: live, LiveCells: added})
}

// PairResponse is /api/v1/pair.
type PairResponse struct {
	Observer string              `json:"observer"`
	Target   string              `json:"target"`
	Pairs    []matrix.PairDetail `json:"pairs"`
	Version  uint64              `json:"version"`
	// Live is the observer node's newest probe result towards the target node (nil when
	// none, or LiveStatus says there are no live cells here).
	Live       *livematrix.Result `json:"live,omitempty"`
	LiveStatus livematrix.Status  `json:"liveStatus"`
}

func (h *handler) pair(w http.ResponseWriter, r *http.Request) {
	m, v, ok := h.snapshot(w)
	if !ok {
		return
	}
	q := r.URL.Query()
	o, t := q.Get("observer"), q.Get("target")
	if o == "" || t == "" {
		writeError(w, http.StatusBadRequest, "observer and target (node names) are required")
		return
	}
	resp := PairResponse{Observer: o, Target: t, Pairs: m.PairsBetween(o, t), Version: v, LiveStatus: h.liveStatus()}
	for _, res := range h.liveRow(resp.LiveStatus, h.opts.Clock())(o) {
		if res.Target == t {
			resp.Live = &res
			break
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

// WhyResponse is /api/v1/node/<name> and /api/v1/target/<namespace>/<name>.
type WhyResponse struct {
	matrix.Explanation
	Version uint64 `json:"version"`
}

func (h *handler) node(w http.ResponseWriter, r *http.Request) {
	m, v, ok := h.snapshot(w)
	if !ok {
		return
	}
	e, found := h.at(m).WhyNode(r.PathValue("name"))
	if !found {
		writeError(w, http.StatusNotFound, fmt.Sprintf("node %q: no such node, and no object names it", r.PathValue("name")))
		return
	}
	writeJSON(w, http.StatusOK, WhyResponse{Explanation: e, Version: v})
}

func (h *handler) target(w http.ResponseWriter, r *http.Request) {
	m, v, ok := h.snapshot(w)
	if !ok {
		return
	}
	e, found := h.at(m).WhyPod(r.PathValue("namespace"), r.PathValue("name"))
	if !found {
		writeError(w, http.StatusNotFound, fmt.Sprintf("pod %s/%s: no PodNetworkHealth object targets it", r.PathValue("namespace"), r.PathValue("name")))
		return
	}
	writeJSON(w, http.StatusOK, WhyResponse{Explanation: e, Version: v})
}

// TopResponse is /api/v1/top.
type TopResponse struct {
	Pairs   []matrix.Pair `json:"pairs"`
	Version uint64        `json:"version"`
}

func (h *handler) top(w http.ResponseWriter, r *http.Request) {
	m, v, ok := h.snapshot(w)
	if !ok {
		return
	}
	n := 20
	if s := r.URL.Query().Get("n"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 || n > MaxTop {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("n: want 1..%d", MaxTop))
			return
		}
	}
	writeJSON(w, http.StatusOK, TopResponse{Pairs: m.Top(n), Version: v})
}

// notModified answers 304 when the client already has this version of this resource.
func notModified(w http.ResponseWriter, r *http.Request, version uint64, resource string) bool {
	sum := sha256.Sum256([]byte(resource))
	etag := fmt.Sprintf(`"%d-%s"`, version, hex.EncodeToString(sum[:4]))
	w.Header().Set("ETag", etag)
	if inm := r.Header.Get("If-None-Match"); inm != "" && strings.Contains(inm, etag) {
		w.WriteHeader(http.StatusNotModified)
		return true
	}
	return false
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// ErrorResponse is the body of every error answer.
type ErrorResponse struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, ErrorResponse{Error: msg})
}
