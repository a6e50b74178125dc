// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8sindextest

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// Request kinds counted by RequestCounter.
const (
	// KindList is a LIST (the first page; continuation pages are KindListContinue).
	KindList         = "list"
	KindListContinue = "list-continue"
	// KindWatchList is a WATCH with sendInitialEvents=true: the streaming replacement of
	// an initial LIST (client-go's WatchListClient).
	KindWatchList = "watchlist"
	// KindWatch is a plain WATCH resuming from a resource version.
	KindWatch = "watch"
	KindOther = "other"
)

// RequestCounter counts API requests by resource and kind, through a RoundTripper it
// wraps around a rest.Config's transport.
type RequestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// NewRequestCounter returns an empty counter.
func NewRequestCounter() *RequestCounter { return &RequestCounter{counts: map[string]int{}} }

// Wrap makes cfg's requests go through the counter (keeping any existing wrapper).
func (c *RequestCounter) Wrap(cfg *rest.Config) {
	prev := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return &countingTransport{c: c, next: rt}
	}
}

// Count returns the number of requests of kind for resource ("pods", "nodes", ...).
func (c *RequestCounter) Count(resource, kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[resource+" "+kind]
}

// InitialSyncs is the number of requests that fetch a resource's full state: LISTs
// (first pages) and watch-list WATCHes.
//
// client-go (WatchListClient, on by default since v0.35) first asks for a watch-list
// stream; an API server that cannot serve one (e.g. etcd without RequestWatchProgress, as
// with the Debian etcd 3.4 of the local control plane) ends that stream at once and the
// reflector falls back to one LIST. So one initial sync is either {watchlist} or
// {watchlist, list}: CheckOneInitialSync accepts both and nothing more.
func (c *RequestCounter) InitialSyncs(resource string) int {
	return c.Count(resource, KindList) + c.Count(resource, KindWatchList)
}

// CheckOneInitialSync returns an error unless resource was fetched in full exactly once
// (one watch-list stream, or a watch-list attempt and the LIST it fell back to).
func (c *RequestCounter) CheckOneInitialSync(resource string) error {
	lists, watchLists := c.Count(resource, KindList), c.Count(resource, KindWatchList)
	if lists > 1 || watchLists > 1 || lists+watchLists == 0 || c.Count(resource, KindListContinue) > 0 && lists == 0 {
		return fmt.Errorf("%s: want one initial sync (a watch-list, or a watch-list attempt and one LIST), got %d LIST and %d watch-list requests (%s)", resource, lists, watchLists, c)
	}
	return nil
}

// String lists all counts, sorted.
func (c *RequestCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.counts))
	for k := range c.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%d", k, c.counts[k])
	}
	return b.String()
}

type countingTransport struct {
	c    *RequestCounter
	next http.RoundTripper
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resource, kind := classify(req)
	t.c.mu.Lock()
	t.c.counts[resource+" "+kind]++
	t.c.mu.Unlock()
	return t.next.RoundTrip(req)
}

// classify names the resource (the last path segment of a collection URL, e.g. "pods"
// for /api/v1/namespaces/x/pods) and the kind of request.
func classify(req *http.Request) (resource, kind string) {
	path := strings.TrimSuffix(req.URL.Path, "/")
	resource = path[strings.LastIndexByte(path, '/')+1:]
	q := req.URL.Query()
	switch {
	case req.Method != http.MethodGet:
		return resource, KindOther
	case q.Get("watch") == "true" || q.Get("watch") == "1":
		if q.Get("sendInitialEvents") == "true" {
			return resource, KindWatchList
		}
		return resource, KindWatch
	case q.Get("continue") != "":
		return resource, KindListContinue
	case resource == "pods" || resource == "nodes":
		return resource, KindList
	default:
		return resource, KindOther
	}
}
