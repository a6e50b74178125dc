// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is written by the command's goroutine and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const closedKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: closed
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: nobody
  user: {token: not-a-token}
contexts:
- name: closed
  context: {cluster: closed, user: nobody}
current-context: closed
`

// A page that re-points its own name at the local view (DNS rebinding) reads nothing: the
// request names the page's host, and serve answers 421 to any name but localhost and the
// --allowed-host ones. No API server is needed: the page is served before the first LIST.
func TestServeRefusesARebindingHost(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(closedKubeconfig), 0o600))
	out := &syncBuffer{}
	cmd := NewCommand(Streams{In: bytes.NewReader(nil), Out: out, ErrOut: out})
	cmd.SetArgs([]string{"serve", "--kubeconfig", kc, "--address", "127.0.0.1:0", "--allowed-host", "view.example.com"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Error("serve did not stop")
		}
	}()
	re := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/`)
	var addr string
	require.Eventually(t, func() bool {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
			return true
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, out.String())
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	status := func(host, path string) int {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		require.NoError(t, err)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/", "/api/v1/pair?observer=node-1&target=node-2", "/api/v1/zones"} {
		assert.Equal(t, http.StatusMisdirectedRequest, status("rebind.attacker.example:"+port, path), path)
	}
	assert.Equal(t, http.StatusOK, status("localhost:"+port, "/"))
	assert.Equal(t, http.StatusOK, status(addr, "/"))
	assert.Equal(t, http.StatusOK, status("view.example.com:"+port, "/"))
}
