// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8stokenauthextension

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/extension/k8stokenauthextension/internal/metadata"
	"github.com/netpulse/netpulse/internal/identity"
)

const audience = "netpulse-gateway"

// fakeJWT is an unsigned token with the given claims: enough for tokenExpiry and the fake
// reviewer, which looks tokens up by value.
func fakeJWT(t testing.TB, claims map[string]any) string {
	t.Helper()
	p, err := json.Marshal(claims)
	require.NoError(t, err)
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(p) + ".c2ln"
}

// fakeReviewer answers from a table of token -> status; unknown tokens are not
// authenticated. It counts calls and the most in flight at once, and can block.
type fakeReviewer struct {
	mu       sync.Mutex
	statuses map[string]authv1.TokenReviewStatus
	err      error
	calls    atomic.Int64
	inFlight atomic.Int64
	maxIn    atomic.Int64
	block    chan struct{}           // when non-nil, Create waits for it (or ctx)
	blockIf  func(token string) bool // when set, only the tokens it names wait for block
	audience []string                // the spec.audiences of the last call
}

func (f *fakeReviewer) Create(ctx context.Context, tr *authv1.TokenReview, _ metav1.CreateOptions) (*authv1.TokenReview, error) {
	f.calls.Add(1)
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.maxIn.Load()
		if n <= m || f.maxIn.CompareAndSwap(m, n) {
			break
		}
	}
	if f.block != nil && (f.blockIf == nil || f.blockIf(tr.Spec.Token)) {
		select {
		case <-f.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.audience = tr.Spec.Audiences
	if f.err != nil {
		return nil, f.err
	}
	out := tr.DeepCopy()
	out.Status = f.statuses[tr.Spec.Token]
	return out, nil
}

func podStatus(ns, sa, pod, uid, node string) authv1.TokenReviewStatus {
	return authv1.TokenReviewStatus{
		Authenticated: true,
		Audiences:     []string{audience},
		User: authv1.UserInfo{
			Username: "system:serviceaccount:" + ns + ":" + sa,
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			Extra: map[string]authv1.ExtraValue{
				extraPodName: {pod}, extraPodUID: {uid}, extraNodeName: {node}, extraNodeUID: {"node-uid-" + node},
				extraCredentialID: {"JTI=" + pod},
			},
		},
	}
}

type fixture struct {
	a   *authenticator
	rv  *fakeReviewer
	tt  *componenttest.Telemetry
	now time.Time
	mu  sync.Mutex
}

func (f *fixture) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func newFixture(t testing.TB, mutate func(*Config)) *fixture {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.Audience = audience
	cfg.ServiceAccounts = []string{"netpulse/netpulse-agent"}
	// The review path; local_test.go sets verification: local.
	cfg.Verification = VerificationReview
	if mutate != nil {
		mutate(cfg)
	}
	require.NoError(t, cfg.Validate())
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	set := extensiontest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tt.NewTelemetrySettings()
	a, err := newAuthenticator(cfg, set)
	require.NoError(t, err)
	f := &fixture{a: a, rv: &fakeReviewer{statuses: map[string]authv1.TokenReviewStatus{}}, tt: tt, now: time.Unix(1_800_000_000, 0)}
	a.now = func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }
	a.reviewer = f.rv
	t.Cleanup(func() { require.NoError(t, a.Shutdown(context.Background())) })
	return f
}

// token returns a token expiring in ttl that the fake reviewer maps to st; its claims are
// those of a projected token for st's user and the gateway's audience (what the structural
// checks read), name makes it unique.
func (f *fixture) token(t *testing.T, name string, ttl time.Duration, st authv1.TokenReviewStatus) string {
	tok := fakeJWT(t, map[string]any{"exp": f.now.Add(ttl).Unix(), "sub": st.User.Username, "aud": []string{audience}, "jti": name})
	f.rv.mu.Lock()
	f.rv.statuses[tok] = st
	f.rv.mu.Unlock()
	return tok
}

func bearer(tok string) map[string][]string {
	return map[string][]string{"authorization": {"Bearer " + tok}}
}

func code(err error) codes.Code { return status.Code(err) }

func (f *fixture) requests(t *testing.T) map[string]int64 {
	t.Helper()
	m, err := f.tt.GetMetric("otelcol_k8s_token_auth_requests")
	if err != nil {
		return map[string]int64{}
	}
	out := map[string]int64{}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		r, _ := dp.Attributes.Value(attribute.Key("result"))
		why, _ := dp.Attributes.Value(attribute.Key("reason"))
		out[r.AsString()+"/"+why.AsString()] += dp.Value
	}
	return out
}

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers map[string][]string
		token   string
		reason  string
	}{
		{"grpc", map[string][]string{"authorization": {"Bearer abc"}}, "abc", ""},
		{"http canonical, lower-case scheme", map[string][]string{"Authorization": {"bearer abc "}}, "abc", ""},
		{"none", map[string][]string{"x": {"y"}}, "", reasonMissingToken},
		{"empty", map[string][]string{"authorization": {"Bearer "}}, "", reasonMissingToken},
		{"basic", map[string][]string{"authorization": {"Basic Zm9vOmJhcg=="}}, "", reasonMalformedToken},
		{"two", map[string][]string{"authorization": {"Bearer a", "Bearer b"}}, "", reasonMalformedToken},
		{"two keys", map[string][]string{"authorization": {"Bearer a"}, "Authorization": {"Bearer b"}}, "", reasonMalformedToken},
		{"too long", map[string][]string{"authorization": {"Bearer " + string(make([]byte, maxTokenBytes+1))}}, "", reasonMalformedToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, reason, _ := bearerToken(tc.headers)
			assert.Equal(t, tc.token, tok)
			assert.Equal(t, tc.reason, reason)
		})
	}
}

func TestTokenExpiry(t *testing.T) {
	exp, err := tokenExpiry(fakeJWT(t, map[string]any{"exp": 1_800_000_000}))
	require.NoError(t, err)
	assert.Equal(t, time.Unix(1_800_000_000, 0), exp)
	exp, err = tokenExpiry(fakeJWT(t, map[string]any{"exp": 1_800_000_000.5}))
	require.NoError(t, err)
	assert.Equal(t, time.Unix(1_800_000_000, 5e8), exp)
	// Padded base64 is tolerated.
	p := base64.URLEncoding.EncodeToString([]byte(`{"exp":1800000000}`))
	_, err = tokenExpiry("eyJhbGciOiJSUzI1NiJ9." + p + ".c2ln")
	require.NoError(t, err)

	for name, tok := range map[string]string{
		"opaque":      "abcdef",
		"two parts":   "a.b",
		"empty sig":   "a.b.",
		"not base64":  "e30.!!!.c2ln",
		"not json":    "e30." + base64.RawURLEncoding.EncodeToString([]byte("nope")) + ".c2ln",
		"no exp":      fakeJWT(t, map[string]any{"sub": "x"}),
		"string exp":  fakeJWT(t, map[string]any{"exp": "soon"}),
		"negative":    fakeJWT(t, map[string]any{"exp": -1}),
		"far future":  fakeJWT(t, map[string]any{"exp": 1e15}),
		"exp is null": fakeJWT(t, map[string]any{"exp": nil}),
	} {
		_, err := tokenExpiry(tok)
		assert.Error(t, err, name)
	}
}

func TestJudge(t *testing.T) {
	allowed := identity.NewAccounts([]string{"netpulse/netpulse-agent"}, []string{"netpulse/netpulse-agent"})
	good := podStatus("netpulse", "netpulse-agent", "agent-1", "uid-1", "node-1")
	o := judge(good, audience, allowed)
	require.Empty(t, o.reason, o.detail)
	assert.Equal(t, identity.Identity{
		Namespace: "netpulse", ServiceAccount: "netpulse-agent", PodName: "agent-1", PodUID: "uid-1",
		NodeName: "node-1", NodeUID: "node-uid-node-1", CredentialID: "JTI=agent-1",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:netpulse", "system:authenticated"},
		Role:   identity.RoleAgent,
	}, o.id)

	mut := func(f func(*authv1.TokenReviewStatus)) authv1.TokenReviewStatus {
		st := podStatus("netpulse", "netpulse-agent", "agent-1", "uid-1", "node-1")
		f(&st)
		return st
	}
	for name, tc := range map[string]struct {
		st     authv1.TokenReviewStatus
		reason string
	}{
		"not authenticated":  {mut(func(s *authv1.TokenReviewStatus) { s.Authenticated = false; s.Error = "token has expired" }), reasonTokenRejected},
		"audience missing":   {mut(func(s *authv1.TokenReviewStatus) { s.Audiences = []string{"https://kubernetes.default.svc"} }), reasonTokenRejected},
		"no audiences":       {mut(func(s *authv1.TokenReviewStatus) { s.Audiences = nil }), reasonTokenRejected},
		"a user":             {mut(func(s *authv1.TokenReviewStatus) { s.User.Username = "alice" }), reasonServiceAccount},
		"malformed sa":       {mut(func(s *authv1.TokenReviewStatus) { s.User.Username = "system:serviceaccount:netpulse" }), reasonServiceAccount},
		"other sa":           {mut(func(s *authv1.TokenReviewStatus) { s.User.Username = "system:serviceaccount:netpulse:netpulse-gateway" }), reasonServiceAccount},
		"other namespace":    {mut(func(s *authv1.TokenReviewStatus) { s.User.Username = "system:serviceaccount:evil:netpulse-agent" }), reasonServiceAccount},
		"not bound to a pod": {mut(func(s *authv1.TokenReviewStatus) { s.User.Extra = nil }), reasonNotBoundToPod},
		"no node (old k8s)":  {mut(func(s *authv1.TokenReviewStatus) { delete(s.User.Extra, extraNodeName) }), reasonNotBoundToPod},
		"no pod uid":         {mut(func(s *authv1.TokenReviewStatus) { delete(s.User.Extra, extraPodUID) }), reasonNotBoundToPod},
		"two pod names":      {mut(func(s *authv1.TokenReviewStatus) { s.User.Extra[extraPodName] = authv1.ExtraValue{"a", "b"} }), reasonNotBoundToPod},
		"bound to a secret": {mut(func(s *authv1.TokenReviewStatus) {
			s.User.Extra = map[string]authv1.ExtraValue{extraCredentialID: {"JTI=x"}}
		}), reasonNotBoundToPod},
		"empty pod name":      {mut(func(s *authv1.TokenReviewStatus) { s.User.Extra[extraPodName] = authv1.ExtraValue{""} }), reasonNotBoundToPod},
		"authenticated error": {mut(func(s *authv1.TokenReviewStatus) { s.Authenticated = false }), reasonTokenRejected},
	} {
		o := judge(tc.st, audience, allowed)
		assert.Equal(t, tc.reason, o.reason, "%s: %s", name, o.detail)
		assert.Equal(t, identity.Identity{}, o.id, name)
	}
}

// Roles: the agents' DaemonSet account is an agent; any other allowed account (a
// workload's, for its sidecar) is a sidecar, whatever it claims; others are rejected.
func TestJudgeRoles(t *testing.T) {
	accounts := identity.NewAccounts([]string{"netpulse/netpulse-agent", "shop/web", "netpulse/default"}, []string{"netpulse/netpulse-agent"})
	for _, tc := range []struct {
		ns, sa string
		role   identity.Role
	}{
		{"netpulse", "netpulse-agent", identity.RoleAgent},
		{"shop", "web", identity.RoleSidecar},
		{"netpulse", "default", identity.RoleSidecar},
	} {
		o := judge(podStatus(tc.ns, tc.sa, "p", "uid-p", "node-1"), audience, accounts)
		require.Empty(t, o.reason, o.detail)
		assert.Equal(t, tc.role, o.id.Role, "%s/%s", tc.ns, tc.sa)
	}
	o := judge(podStatus("shop", "db", "p", "uid-p", "node-1"), audience, accounts)
	assert.Equal(t, reasonServiceAccount, o.reason)
	assert.Equal(t, identity.RoleNone, accounts.RoleOf("shop", "db"))
}

// A workload service account added to service_accounts is a sidecar end to end: the
// identity on the request says so, and it never becomes an agent.
func TestAuthenticateWorkloadAccountIsASidecar(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.ServiceAccounts = []string{"netpulse/netpulse-agent", "shop/web"}
		c.AgentServiceAccounts = []string{"netpulse/netpulse-agent"}
	})
	tok := f.token(t, "web", time.Hour, podStatus("shop", "web", "web-1", "uid-w", "node-1"))
	ctx, err := f.a.Authenticate(context.Background(), bearer(tok))
	require.NoError(t, err)
	id, _, ok := identity.FromContext(ctx)
	require.True(t, ok)
	assert.Equal(t, identity.RoleSidecar, id.Role)
	b := identity.MatchContext(ctx, identity.Source{Namespace: "shop", PodName: "web-1", PodUID: "uid-w", NodeName: "node-1"})
	refusal, isAgent := b.Agent()
	assert.False(t, isAgent)
	assert.Equal(t, identity.RefusedNotAgent, refusal)
	_, own := b.Own()
	assert.True(t, own)
}

// An accepted token puts the identity on the client info: Auth (the extension's own type)
// and the reserved metadata keys, replacing any incoming key with the reserved prefix and
// keeping the other metadata.
func TestAuthenticateSetsClientInfo(t *testing.T) {
	f := newFixture(t, nil)
	tok := f.token(t, "a", time.Hour, podStatus("netpulse", "netpulse-agent", "agent-1", "uid-1", "node-1"))
	in := client.NewContext(context.Background(), client.Info{
		Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 4242},
		Metadata: client.NewMetadata(map[string][]string{
			"x-tenant":                  {"blue"},
			identity.MetadataPodUID:     {"forged"},
			"auth.netpulse.io/other":    {"forged"},
			identity.MetadataNodeName:   {"forged", "twice"},
			"Auth.Netpulse.IO/pod-name": {"forged"},
		}),
	})
	ctx, err := f.a.Authenticate(in, bearer(tok))
	require.NoError(t, err)
	assert.Equal(t, []string{audience}, f.rv.audience, "the review asks the API to check the audience")

	info := client.FromContext(ctx)
	assert.Equal(t, "192.0.2.1:4242", info.Addr.String())
	assert.Equal(t, "system:serviceaccount:netpulse:netpulse-agent", info.Auth.GetAttribute(identity.AttrSubject))
	assert.Equal(t, "agent-1", info.Auth.GetAttribute(identity.AttrPodName))
	assert.Equal(t, "uid-1", info.Auth.GetAttribute(identity.AttrPodUID))
	assert.Equal(t, "node-1", info.Auth.GetAttribute(identity.AttrNodeName))
	assert.Equal(t, "netpulse", info.Auth.GetAttribute(identity.AttrNamespace))
	assert.Equal(t, "JTI=agent-1", info.Auth.GetAttribute(identity.AttrCredentialID))
	assert.Equal(t, "agent", info.Auth.GetAttribute(identity.AttrRole))
	assert.Nil(t, info.Auth.GetAttribute("raw"), "the token itself is never exposed")
	for _, n := range info.Auth.GetAttributeNames() {
		assert.NotNil(t, info.Auth.GetAttribute(n), n)
	}

	assert.Equal(t, []string{"blue"}, info.Metadata.Get("x-tenant"))
	assert.Equal(t, []string{"uid-1"}, info.Metadata.Get(identity.MetadataPodUID))
	assert.Equal(t, []string{"agent-1"}, info.Metadata.Get(identity.MetadataPodName))
	assert.Equal(t, []string{"node-1"}, info.Metadata.Get(identity.MetadataNodeName))
	assert.Equal(t, []string{"netpulse"}, info.Metadata.Get(identity.MetadataNamespace))
	assert.Equal(t, []string{"netpulse-agent"}, info.Metadata.Get(identity.MetadataServiceAccount))
	assert.Equal(t, []string{"agent"}, info.Metadata.Get(identity.MetadataRole))
	assert.Nil(t, info.Metadata.Get("auth.netpulse.io/other"), "incoming keys with the reserved prefix are dropped")

	id, via, ok := identity.FromContext(ctx)
	require.True(t, ok)
	assert.Equal(t, identity.ViaAuth, via)
	assert.Equal(t, "netpulse/agent-1(uid-1)@node-1", id.String())
	// What the batch processor keeps: the metadata alone.
	id2, via, ok := identity.FromClientInfo(client.Info{Metadata: info.Metadata})
	require.True(t, ok)
	assert.Equal(t, identity.ViaMetadata, via)
	assert.Equal(t, id.String(), id2.String())
	assert.Equal(t, map[string]int64{"accepted/reviewed": 1}, f.requests(t))
}

func TestAuthenticateRejections(t *testing.T) {
	f := newFixture(t, nil)
	other := f.token(t, "other-sa", time.Hour, podStatus("netpulse", "netpulse-gateway", "gw-1", "uid-g", "node-1"))
	unbound := podStatus("netpulse", "netpulse-agent", "", "", "")
	unbound.User.Extra = nil
	plain := f.token(t, "unbound", time.Hour, unbound)
	wrongAud := podStatus("netpulse", "netpulse-agent", "agent-1", "uid-1", "node-1")
	wrongAud.Authenticated, wrongAud.Audiences, wrongAud.Error = false, nil, "token audiences [\"x\"] is invalid for the target audiences"
	aud := f.token(t, "aud", time.Hour, wrongAud)
	expired := fakeJWT(t, map[string]any{"exp": f.now.Add(-time.Second).Unix()})

	for name, tc := range map[string]struct {
		headers map[string][]string
		reason  string
	}{
		"no token":            {map[string][]string{}, reasonMissingToken},
		"not a JWT":           {bearer("opaque-token"), reasonMalformedToken},
		"expired":             {bearer(expired), reasonExpiredToken},
		"other sa":            {bearer(other), reasonServiceAccount},
		"not bound to a pod":  {bearer(plain), reasonNotBoundToPod},
		"wrong audience":      {bearer(aud), reasonTokenRejected},
		"unknown to the API":  {bearer(fakeJWT(t, map[string]any{"exp": f.now.Add(time.Hour).Unix()})), reasonTokenRejected},
		"basic authorization": {map[string][]string{"authorization": {"Basic eDp5"}}, reasonMalformedToken},
	} {
		ctx, err := f.a.Authenticate(context.Background(), tc.headers)
		require.Error(t, err, name)
		assert.Equal(t, codes.Unauthenticated, code(err), "%s: %v", name, err)
		assert.Contains(t, err.Error(), tc.reason, name)
		_, _, ok := identity.FromContext(ctx)
		assert.False(t, ok, name)
	}
	// Only the two tokens that got as far as the API were reviewed (unbound, wrong audience
	// per the API): missing, malformed, visibly expired tokens and those whose claims name no
	// allowed service account (other sa) or not the gateway's audience (unknown) cost no call.
	assert.EqualValues(t, 2, f.rv.calls.Load())
	r := f.requests(t)
	assert.EqualValues(t, 1, r["rejected/expired_token"])
	assert.EqualValues(t, 2, r["rejected/malformed_token"])
}

// N requests with one token cost one TokenReview until the cache entry expires: at
// max_ttl, or at the token's own expiry when that comes first.
func TestCacheBoundsReviews(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Cache.MaxTTL = 5 * time.Minute })
	st := podStatus("netpulse", "netpulse-agent", "agent-1", "uid-1", "node-1")
	long := f.token(t, "long", time.Hour, st)
	for range 100 {
		_, err := f.a.Authenticate(context.Background(), bearer(long))
		require.NoError(t, err)
		f.advance(time.Second) // 100 s: within max_ttl
	}
	assert.EqualValues(t, 1, f.rv.calls.Load())
	f.advance(201 * time.Second) // past 5 min after the review
	_, err := f.a.Authenticate(context.Background(), bearer(long))
	require.NoError(t, err)
	assert.EqualValues(t, 2, f.rv.calls.Load(), "reviewed again after max_ttl")
	assert.Equal(t, map[string]int64{"accepted/reviewed": 2, "accepted/cached": 99}, f.requests(t))

	// A token expiring in 90 s is cached for 90 s, not 5 min, and then rejected locally.
	short := f.token(t, "short", 90*time.Second, st)
	_, err = f.a.Authenticate(context.Background(), bearer(short))
	require.NoError(t, err)
	f.advance(89 * time.Second)
	_, err = f.a.Authenticate(context.Background(), bearer(short))
	require.NoError(t, err)
	assert.EqualValues(t, 3, f.rv.calls.Load())
	f.advance(2 * time.Second)
	_, err = f.a.Authenticate(context.Background(), bearer(short))
	assert.Equal(t, codes.Unauthenticated, code(err))
	assert.Contains(t, err.Error(), reasonExpiredToken)
	assert.EqualValues(t, 3, f.rv.calls.Load())
}

func TestNegativeCache(t *testing.T) {
	// A token of an allowed account that the API does not authenticate (a deleted pod's).
	revoked := podStatus("netpulse", "netpulse-agent", "p", "u", "n")
	revoked.Authenticated = false
	f := newFixture(t, func(c *Config) { c.Cache.NegativeTTL = 10 * time.Second })
	bad := f.token(t, "bad", time.Hour, revoked)
	for range 5 {
		_, err := f.a.Authenticate(context.Background(), bearer(bad))
		assert.Equal(t, codes.Unauthenticated, code(err))
	}
	assert.EqualValues(t, 1, f.rv.calls.Load())
	f.advance(11 * time.Second)
	_, err := f.a.Authenticate(context.Background(), bearer(bad))
	assert.Equal(t, codes.Unauthenticated, code(err))
	assert.EqualValues(t, 2, f.rv.calls.Load())

	g := newFixture(t, func(c *Config) { c.Cache.NegativeTTL = 0 })
	bad = g.token(t, "bad", time.Hour, revoked)
	for range 3 {
		_, err := g.a.Authenticate(context.Background(), bearer(bad))
		assert.Equal(t, codes.Unauthenticated, code(err))
	}
	assert.EqualValues(t, 3, g.rv.calls.Load(), "negative_ttl 0 caches no rejection")
}

func TestCacheIsBounded(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Cache.MaxEntries = 10 })
	for i := range 50 {
		tok := f.token(t, fmt.Sprint(i), time.Hour, podStatus("netpulse", "netpulse-agent", fmt.Sprint("agent-", i), fmt.Sprint("uid-", i), "node-1"))
		_, err := f.a.Authenticate(context.Background(), bearer(tok))
		require.NoError(t, err)
	}
	assert.Equal(t, 10, f.a.cache.len())
	assert.EqualValues(t, 50, f.rv.calls.Load())
}

// The API not answering is Unavailable (the exporter retries) and nothing is cached: the
// retry reviews again.
func TestReviewErrorIsUnavailableAndNotCached(t *testing.T) {
	f := newFixture(t, nil)
	tok := f.token(t, "a", time.Hour, podStatus("netpulse", "netpulse-agent", "agent-1", "uid-1", "node-1"))
	f.rv.err = errors.New("connection refused")
	_, err := f.a.Authenticate(context.Background(), bearer(tok))
	assert.Equal(t, codes.Unavailable, code(err), "%v", err)
	f.rv.mu.Lock()
	f.rv.err = nil
	f.rv.mu.Unlock()
	_, err = f.a.Authenticate(context.Background(), bearer(tok))
	require.NoError(t, err)
	assert.EqualValues(t, 2, f.rv.calls.Load())
	m, err := f.tt.GetMetric("otelcol_k8s_token_auth_token_reviews")
	require.NoError(t, err)
	got := map[string]int64{}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value(attribute.Key("outcome"))
		got[v.AsString()] += dp.Value
	}
	assert.Equal(t, map[string]int64{"error": 1, "authenticated": 1}, got)
}

// Concurrent requests with one token share one review (singleflight); distinct tokens are
// reviewed at most max_concurrent_reviews at a time.
func TestConcurrentReviewsAreSharedAndBounded(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxConcurrentReviews = 2 })
	f.rv.block = make(chan struct{})
	st := podStatus("netpulse", "netpulse-agent", "agent-1", "uid-1", "node-1")
	same := f.token(t, "same", time.Hour, st)
	var toks []string
	for i := range 6 {
		toks = append(toks, f.token(t, fmt.Sprint("t", i), time.Hour, st))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for range 20 {
		wg.Go(func() {
			_, err := f.a.Authenticate(context.Background(), bearer(same))
			errs <- err
		})
	}
	for _, tok := range toks {
		wg.Go(func() {
			_, err := f.a.Authenticate(context.Background(), bearer(tok))
			errs <- err
		})
	}
	require.Eventually(t, func() bool { return f.rv.inFlight.Load() == 2 }, 5*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	assert.EqualValues(t, 2, f.rv.inFlight.Load(), "at most max_concurrent_reviews in flight")
	close(f.rv.block)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.EqualValues(t, 2, f.rv.maxIn.Load())
	assert.EqualValues(t, 7, f.rv.calls.Load(), "20 requests with one token: one review")
}

// A request whose deadline passes while its review waits is answered Unavailable; the
// review completes and the retry is answered from the cache.
func TestCallerDeadlineWhileReviewing(t *testing.T) {
	f := newFixture(t, nil)
	f.rv.block = make(chan struct{})
	tok := f.token(t, "a", time.Hour, podStatus("netpulse", "netpulse-agent", "agent-1", "uid-1", "node-1"))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := f.a.Authenticate(ctx, bearer(tok))
	assert.Equal(t, codes.Unavailable, code(err))
	close(f.rv.block)
	require.Eventually(t, func() bool { return f.a.cache.len() == 1 }, 5*time.Second, time.Millisecond)
	_, err = f.a.Authenticate(context.Background(), bearer(tok))
	require.NoError(t, err)
	assert.EqualValues(t, 1, f.rv.calls.Load())
}

// Shutdown while a review hangs returns promptly (the review is cancelled), twice, and
// later requests are Unavailable.
func TestShutdownCancelsReviews(t *testing.T) {
	f := newFixture(t, nil)
	f.rv.block = make(chan struct{}) // never closed
	tok := f.token(t, "a", time.Hour, podStatus("netpulse", "netpulse-agent", "agent-1", "uid-1", "node-1"))
	done := make(chan error)
	go func() {
		_, err := f.a.Authenticate(context.Background(), bearer(tok))
		done <- err
	}()
	require.Eventually(t, func() bool { return f.rv.inFlight.Load() == 1 }, 5*time.Second, time.Millisecond)
	start := time.Now()
	require.NoError(t, f.a.Shutdown(context.Background()))
	require.NoError(t, f.a.Shutdown(context.Background()))
	assert.Less(t, time.Since(start), time.Second)
	assert.Equal(t, codes.Unavailable, code(<-done))
	_, err := f.a.Authenticate(context.Background(), bearer(tok))
	assert.Equal(t, codes.Unavailable, code(err))
}

func TestStartOutsideAClusterFails(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Audience, cfg.ServiceAccounts = audience, []string{"netpulse/netpulse-agent"}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	a, err := newAuthenticator(cfg, extensiontest.NewNopSettings(metadata.Type))
	require.NoError(t, err)
	err = a.Start(context.Background(), componenttest.NewNopHost())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "auth_type serviceAccount")
	require.NoError(t, a.Shutdown(context.Background()))
}

// While the API cannot answer, a token accepted before is accepted for stale_if_error past
// max_ttl (never past its own expiry); an answer of the API always wins.
func TestStaleIfError(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Cache.MaxTTL = time.Minute; c.Cache.StaleIfError = 10 * time.Minute })
	st := podStatus("netpulse", "netpulse-agent", "agent-1", "uid-1", "node-1")
	tok := f.token(t, "a", 30*time.Minute, st)
	short := f.token(t, "short", 5*time.Minute, st)
	for _, k := range []string{tok, short} {
		_, err := f.a.Authenticate(context.Background(), bearer(k))
		require.NoError(t, err)
	}
	setErr := func(err error) {
		f.rv.mu.Lock()
		f.rv.err = err
		f.rv.mu.Unlock()
	}
	setErr(errors.New("connection refused"))
	f.advance(2 * time.Minute) // past max_ttl: a review is due, and fails
	ctx, err := f.a.Authenticate(context.Background(), bearer(tok))
	require.NoError(t, err, "stale identity accepted while the API does not answer")
	id, _, ok := identity.FromContext(ctx)
	require.True(t, ok)
	assert.Equal(t, "agent-1", id.PodName)
	assert.EqualValues(t, 1, f.requests(t)["accepted/stale"])

	f.advance(4 * time.Minute) // 6 min: past the short token's expiry
	_, err = f.a.Authenticate(context.Background(), bearer(short))
	assert.Equal(t, codes.Unauthenticated, code(err), "never past the token's expiry")
	f.advance(6 * time.Minute) // 12 min: past max_ttl + stale_if_error
	_, err = f.a.Authenticate(context.Background(), bearer(tok))
	assert.Equal(t, codes.Unavailable, code(err), "%v", err)

	// An answer of the API wins over a stale acceptance.
	g := newFixture(t, func(c *Config) { c.Cache.MaxTTL = time.Minute })
	tok = g.token(t, "b", 30*time.Minute, st)
	_, err = g.a.Authenticate(context.Background(), bearer(tok))
	require.NoError(t, err)
	g.advance(2 * time.Minute)
	g.rv.mu.Lock()
	g.rv.statuses[tok] = authv1.TokenReviewStatus{Error: "service account token has been invalidated"}
	g.rv.mu.Unlock()
	_, err = g.a.Authenticate(context.Background(), bearer(tok))
	assert.Equal(t, codes.Unauthenticated, code(err))

	// stale_if_error 0: Unavailable at once.
	h := newFixture(t, func(c *Config) { c.Cache.MaxTTL = time.Minute; c.Cache.StaleIfError = 0 })
	tok = h.token(t, "c", 30*time.Minute, st)
	_, err = h.a.Authenticate(context.Background(), bearer(tok))
	require.NoError(t, err)
	h.rv.mu.Lock()
	h.rv.err = errors.New("connection refused")
	h.rv.mu.Unlock()
	h.advance(2 * time.Minute)
	_, err = h.a.Authenticate(context.Background(), bearer(tok))
	assert.Equal(t, codes.Unavailable, code(err))
}
