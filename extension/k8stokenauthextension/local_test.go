// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8stokenauthextension

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netpulse/netpulse/internal/identity"
)

const testIssuer = "https://kubernetes.default.svc.cluster.local"

// issuerKey is one of the test issuer's signing keys.
type issuerKey struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func newRSAKey(t testing.TB, kid string) issuerKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return issuerKey{kid: kid, alg: jose.RS256, priv: k}
}

func newECKey(t testing.TB, kid string) issuerKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return issuerKey{kid: kid, alg: jose.ES256, priv: k}
}

// fakeIssuer serves the API server's discovery document and JWKS from the keys it
// publishes, and counts the fetches.
type fakeIssuer struct {
	mu        sync.Mutex
	issuer    string
	published []issuerKey
	err       error
	fetches   atomic.Int64 // JWKS fetches
}

func (fi *fakeIssuer) publish(keys ...issuerKey) {
	fi.mu.Lock()
	fi.published = keys
	fi.mu.Unlock()
}

func (fi *fakeIssuer) get(_ context.Context, path string) ([]byte, error) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	if fi.err != nil {
		return nil, fi.err
	}
	switch path {
	case discoveryPath:
		return json.Marshal(map[string]any{"issuer": fi.issuer, "jwks_uri": "https://203.0.113.1:6443/openid/v1/jwks",
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256"}})
	case jwksPath:
		fi.fetches.Add(1)
		var set jose.JSONWebKeySet
		for _, k := range fi.published {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"})
		}
		return json.Marshal(set)
	}
	return nil, errors.New("404")
}

// sign returns a JWS of claims signed with k (its kid in the header).
func sign(t testing.TB, k issuerKey, claims any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: k.priv}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", k.kid))
	require.NoError(t, err)
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	require.NoError(t, err)
	return tok
}

// podClaims are a projected token's claims for pod name/uid on node, of the agents'
// service account, for the gateway's audience, issued now, valid for ttl.
func podClaims(now time.Time, ttl time.Duration, pod, uid, node string) map[string]any {
	return map[string]any{
		"aud": []string{audience}, "iss": testIssuer,
		"exp": now.Add(ttl).Unix(), "iat": now.Unix(), "nbf": now.Unix(),
		"jti": "jti-" + pod + "-" + uid,
		"sub": "system:serviceaccount:netpulse:netpulse-agent",
		"kubernetes.io": map[string]any{
			"namespace":      "netpulse",
			"serviceaccount": map[string]any{"name": "netpulse-agent", "uid": "sa-uid"},
			"pod":            map[string]any{"name": pod, "uid": uid},
			"node":           map[string]any{"name": node, "uid": "node-uid-" + node},
			"warnafter":      now.Add(ttl / 2).Unix(),
		},
	}
}

type localFixture struct {
	*fixture
	iss *fakeIssuer
	key issuerKey
}

// newLocalFixture: verification local, the issuer publishing one RSA key, its keys
// fetched, and the agents' account's pods listed with agent-1 (uid-1) on node-1.
func newLocalFixture(t testing.TB, mutate func(*Config)) *localFixture {
	t.Helper()
	f := newFixture(t, func(c *Config) {
		c.Verification = VerificationLocal
		if mutate != nil {
			mutate(c)
		}
	})
	lf := &localFixture{fixture: f, iss: &fakeIssuer{issuer: testIssuer}, key: newRSAKey(t, "key-1")}
	lf.iss.publish(lf.key)
	f.a.verifier.keys.setGetter(lf.iss.get)
	require.True(t, f.a.verifier.keys.refetch(context.Background()))
	lf.setPods(t, map[string]string{"uid-1": "agent-1"})
	return lf
}

// setPods lists the agents' account's pods (uid -> name, all on node-1): the watch's
// initial list or a relist.
func (lf *localFixture) setPods(t testing.TB, pods map[string]string) {
	t.Helper()
	var list []any
	for uid, name := range pods {
		list = append(list, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "netpulse", UID: types.UID(uid)},
			Spec: corev1.PodSpec{ServiceAccountName: "netpulse-agent", NodeName: "node-1"}})
	}
	st := &accountStore{ap: lf.a.verifier.pods.accounts["netpulse/netpulse-agent"]}
	require.NoError(t, st.Replace(list, "1"))
}

func (lf *localFixture) deletePod(t *testing.T, uid, name string) {
	t.Helper()
	st := &accountStore{ap: lf.a.verifier.pods.accounts["netpulse/netpulse-agent"]}
	require.NoError(t, st.Delete(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "netpulse", UID: types.UID(uid)}}))
}

// tokenFor signs the pod's claims (mutated) with k.
func (lf *localFixture) tokenFor(t *testing.T, k issuerKey, pod, uid string, mutate func(map[string]any)) string {
	c := podClaims(lf.now, time.Hour, pod, uid, "node-1")
	if mutate != nil {
		mutate(c)
	}
	return sign(t, k, c)
}

func (lf *localFixture) local(t *testing.T) map[string]int64 {
	t.Helper()
	m, err := lf.tt.GetMetric("otelcol_k8s_token_auth_local_verifications")
	if err != nil {
		return map[string]int64{}
	}
	out := map[string]int64{}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value(attribute.Key("verdict"))
		r, _ := dp.Attributes.Value(attribute.Key("reason"))
		k := v.AsString()
		if r.AsString() != "" {
			k += "/" + r.AsString()
		}
		out[k] += dp.Value
	}
	return out
}

// A projected token signed with the issuer's key, bound to a pod the watch has, is
// accepted with no TokenReview, with the identity its claims carry; then from the cache.
func TestLocalAcceptsWithoutReview(t *testing.T) {
	for _, alg := range []string{"RS256", "ES256"} {
		t.Run(alg, func(t *testing.T) {
			lf := newLocalFixture(t, nil)
			if alg == "ES256" {
				lf.key = newECKey(t, "key-ec")
				lf.iss.publish(lf.key)
				lf.advance(time.Minute)
				require.True(t, lf.a.verifier.keys.refetch(context.Background()))
			}
			tok := lf.tokenFor(t, lf.key, "agent-1", "uid-1", nil)
			for range 3 {
				ctx, err := lf.a.Authenticate(context.Background(), bearer(tok))
				require.NoError(t, err)
				id, _, ok := identity.FromContext(ctx)
				require.True(t, ok)
				assert.Equal(t, identity.Identity{
					Namespace: "netpulse", ServiceAccount: "netpulse-agent", PodName: "agent-1", PodUID: "uid-1",
					NodeName: "node-1", NodeUID: "node-uid-node-1", CredentialID: "JTI=jti-agent-1-uid-1",
					Groups: []string{"system:serviceaccounts", "system:serviceaccounts:netpulse", "system:authenticated"},
					Role:   identity.RoleAgent,
				}, id)
			}
			assert.Zero(t, lf.rv.calls.Load(), "no TokenReview")
			assert.Equal(t, map[string]int64{"accepted/verified": 1, "accepted/cached": 2}, lf.requests(t))
			assert.Equal(t, map[string]int64{"accepted": 1}, lf.local(t))
		})
	}
}

// Every token local verification must refuse is refused without a review (and without
// ever being accepted).
func TestLocalRejections(t *testing.T) {
	lf := newLocalFixture(t, func(c *Config) { c.Issuer = testIssuer })
	rogue := newRSAKey(t, "key-1") // another key claiming the issuer's key ID
	hsToken := func() string {
		// HS256 with the issuer's public key as the HMAC secret (the classic confusion).
		der, err := x509.MarshalPKIXPublicKey(lf.key.priv.Public())
		require.NoError(t, err)
		enc := base64.RawURLEncoding.EncodeToString
		h, _ := json.Marshal(map[string]string{"alg": "HS256", "kid": "key-1", "typ": "JWT"})
		p, _ := json.Marshal(podClaims(lf.now, time.Hour, "agent-1", "uid-1", "node-1"))
		signed := enc(h) + "." + enc(p)
		mac := hmac.New(sha256.New, der)
		mac.Write([]byte(signed))
		return signed + "." + enc(mac.Sum(nil))
	}
	noneToken := func() string {
		enc := base64.RawURLEncoding.EncodeToString
		h, _ := json.Marshal(map[string]string{"alg": "none", "kid": "key-1"})
		p, _ := json.Marshal(podClaims(lf.now, time.Hour, "agent-1", "uid-1", "node-1"))
		return enc(h) + "." + enc(p) + ".c2ln"
	}
	for _, tc := range []struct {
		name, token, reason string
	}{
		{"expired", lf.tokenFor(t, lf.key, "agent-1", "uid-1", func(c map[string]any) {
			c["exp"] = lf.now.Add(-time.Second).Unix()
			c["iat"], c["nbf"] = lf.now.Add(-time.Hour).Unix(), lf.now.Add(-time.Hour).Unix()
		}), reasonExpiredToken},
		{"other audience", lf.tokenFor(t, lf.key, "agent-1", "uid-1", func(c map[string]any) { c["aud"] = []string{"https://kubernetes.default.svc"} }), reasonTokenRejected},
		{"other issuer (configured)", lf.tokenFor(t, lf.key, "agent-1", "uid-1", func(c map[string]any) { c["iss"] = "https://evil.example" }), reasonTokenRejected},
		{"signed by another key with the issuer's kid", lf.tokenFor(t, rogue, "agent-1", "uid-1", nil), reasonTokenRejected},
		{"HS256 with the public key", hsToken(), reasonMalformedToken},
		{"alg none", noneToken(), reasonMalformedToken},
		{"not bound to a pod", lf.tokenFor(t, lf.key, "agent-1", "uid-1", func(c map[string]any) {
			delete(c["kubernetes.io"].(map[string]any), "pod")
		}), reasonNotBoundToPod},
		{"no node", lf.tokenFor(t, lf.key, "agent-1", "uid-1", func(c map[string]any) {
			delete(c["kubernetes.io"].(map[string]any), "node")
		}), reasonNotBoundToPod},
		{"sub of another account than the claim", lf.tokenFor(t, lf.key, "agent-1", "uid-1", func(c map[string]any) {
			c["kubernetes.io"].(map[string]any)["serviceaccount"] = map[string]any{"name": "intruder", "uid": "x"}
		}), reasonServiceAccount},
		{"the pod's UID with another name", lf.tokenFor(t, lf.key, "agent-2", "uid-1", nil), reasonTokenRejected},
		{"the pod's UID on another node", sign(t, lf.key, podClaims(lf.now, time.Hour, "agent-1", "uid-1", "node-2")), reasonTokenRejected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := lf.a.Authenticate(context.Background(), bearer(tc.token))
			require.Error(t, err)
			assert.Equal(t, codes.Unauthenticated, code(err), "%v", err)
			assert.Contains(t, err.Error(), tc.reason)
		})
	}
	assert.Zero(t, lf.rv.calls.Load(), "no TokenReview for any of them")
	assert.Zero(t, lf.requests(t)["accepted/verified"])
	assert.EqualValues(t, 1, lf.iss.fetches.Load(), "no key fetch either: every kid was known")
}

// A token signed by a key the issuer does not publish makes the gateway fetch the keys
// once (rate-limited: more such tokens within min_refetch_interval make no fetch), and then
// goes to TokenReview, which refuses it.
func TestLocalUnknownKeyRefetchesThenReviews(t *testing.T) {
	lf := newLocalFixture(t, nil)
	stranger := newRSAKey(t, "key-stranger")
	lf.advance(time.Minute) // past min_refetch_interval since the fixture's fetch
	for i := range 5 {
		tok := lf.tokenFor(t, stranger, "agent-1", "uid-1", func(c map[string]any) { c["jti"] = string(rune('a' + i)) })
		_, err := lf.a.Authenticate(context.Background(), bearer(tok))
		require.Error(t, err)
		assert.Equal(t, codes.Unauthenticated, code(err), "%v", err)
	}
	assert.EqualValues(t, 2, lf.iss.fetches.Load(), "one refetch for five tokens of an unknown key")
	assert.EqualValues(t, 5, lf.rv.calls.Load(), "each goes to the API, which refuses it")
	assert.Equal(t, map[string]int64{"fallback/unknown_key": 5}, lf.local(t))
	assert.Equal(t, map[string]int64{"rejected/token_rejected": 5}, lf.requests(t))
}

// The issuer rotates its key: a token of the new key is verified locally after one
// refetch (no restart, no review); once the old key is withdrawn, the next scheduled fetch
// drops it and its tokens go to the API.
func TestLocalFollowsKeyRotation(t *testing.T) {
	lf := newLocalFixture(t, nil)
	oldTok := lf.tokenFor(t, lf.key, "agent-1", "uid-1", nil)
	_, err := lf.a.Authenticate(context.Background(), bearer(oldTok))
	require.NoError(t, err)

	next := newECKey(t, "key-2")
	lf.iss.publish(lf.key, next)
	lf.advance(11 * time.Second)
	newTok := lf.tokenFor(t, next, "agent-1", "uid-1", func(c map[string]any) { c["jti"] = "new" })
	_, err = lf.a.Authenticate(context.Background(), bearer(newTok))
	require.NoError(t, err)
	assert.EqualValues(t, 2, lf.iss.fetches.Load())
	assert.Zero(t, lf.rv.calls.Load())
	assert.EqualValues(t, 2, lf.requests(t)["accepted/verified"])

	// The old key withdrawn; the periodic refresh (run) picks that up.
	lf.iss.publish(next)
	lf.advance(11 * time.Second)
	require.True(t, lf.a.verifier.keys.refetch(context.Background()))
	lf.advance(11 * time.Minute) // past max_ttl: the old token is verified again
	lf.rv.statuses[oldTok] = podStatus("netpulse", "netpulse-agent", "agent-1", "uid-1", "node-1")
	_, err = lf.a.Authenticate(context.Background(), bearer(oldTok))
	require.NoError(t, err, "the API still accepts it: nothing the API accepts is refused")
	assert.EqualValues(t, 1, lf.rv.calls.Load(), "a withdrawn key's token goes to the API")
	assert.EqualValues(t, 1, lf.local(t)["fallback/unknown_key"])
}

// Revocation follows the pod: a token accepted locally (and cached) is refused as soon as
// the watch sees its pod deleted - without asking the API (a UID is never reused) - and a
// new token of the deleted pod too.
func TestLocalBoundPodDeleted(t *testing.T) {
	lf := newLocalFixture(t, nil)
	tok := lf.tokenFor(t, lf.key, "agent-1", "uid-1", nil)
	_, err := lf.a.Authenticate(context.Background(), bearer(tok))
	require.NoError(t, err)
	assert.Equal(t, 1, lf.a.cache.len())

	lf.deletePod(t, "uid-1", "agent-1")
	for _, tk := range []string{tok, tok, lf.tokenFor(t, lf.key, "agent-1", "uid-1", func(c map[string]any) { c["jti"] = "other" })} {
		_, err = lf.a.Authenticate(context.Background(), bearer(tk))
		require.Error(t, err)
		assert.Equal(t, codes.Unauthenticated, code(err), "%v", err)
		assert.Contains(t, err.Error(), reasonTokenRejected)
	}
	assert.Zero(t, lf.a.cache.len(), "the cached acceptance dropped")
	assert.Zero(t, lf.rv.calls.Load(), "no TokenReview")
	assert.Equal(t, map[string]int64{"accepted": 1, "rejected/token_rejected": 2}, lf.local(t), "the second from the negative cache")
}

// A pod of the token's name exists with another UID (deleted and created again). When the
// watch saw the old UID go, the token is refused locally; when it never saw it (the gateway
// started after the deletion), the API is asked and refuses it.
func TestLocalPodWithAnotherUID(t *testing.T) {
	t.Run("deletion seen", func(t *testing.T) {
		lf := newLocalFixture(t, nil)
		lf.setPods(t, map[string]string{"uid-2": "agent-1"}) // a relist: uid-1 is gone
		_, err := lf.a.Authenticate(context.Background(), bearer(lf.tokenFor(t, lf.key, "agent-1", "uid-1", nil)))
		require.Error(t, err)
		assert.Equal(t, codes.Unauthenticated, code(err), "%v", err)
		assert.Equal(t, map[string]int64{"rejected/token_rejected": 1}, lf.local(t))
		assert.Zero(t, lf.rv.calls.Load())
	})
	t.Run("deletion not seen", func(t *testing.T) {
		lf := newLocalFixture(t, nil)
		lf.a.verifier.pods = newBoundPods([]string{"netpulse/netpulse-agent"})
		lf.setPods(t, map[string]string{"uid-2": "agent-1"})
		_, err := lf.a.Authenticate(context.Background(), bearer(lf.tokenFor(t, lf.key, "agent-1", "uid-1", nil)))
		require.Error(t, err)
		assert.Equal(t, codes.Unauthenticated, code(err), "%v", err)
		assert.Equal(t, map[string]int64{"fallback/pod_not_found": 1}, lf.local(t))
		assert.EqualValues(t, 1, lf.rv.calls.Load())
		assert.Zero(t, lf.requests(t)["accepted/verified"])
	})
}

// What local verification cannot decide goes to TokenReview, so nothing the API accepts
// is refused: keys not fetched yet, the pod watch not synced, a pod it has not seen yet,
// a token of an issuer the API server also accepts, a pod being deleted.
func TestLocalFallsBackToReview(t *testing.T) {
	good := podStatus("netpulse", "netpulse-agent", "agent-1", "uid-1", "node-1")
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, lf *localFixture)
		token func(t *testing.T, lf *localFixture) string
		why   string
	}{
		{"keys not fetched (no discovery grant)", func(t *testing.T, lf *localFixture) {
			lf.a.verifier.keys.set.Store(nil)
			lf.iss.err = errors.New("forbidden")
			lf.advance(time.Minute)
		}, nil, fallbackNoKeys},
		{"pods not synced", func(t *testing.T, lf *localFixture) {
			lf.a.verifier.pods = newBoundPods([]string{"netpulse/netpulse-agent"})
		}, nil, fallbackPodsNotReady},
		{"pod not seen yet", func(t *testing.T, lf *localFixture) {
			lf.a.verifier.pods = newBoundPods([]string{"netpulse/netpulse-agent"})
			lf.setPods(t, nil)
		}, nil, fallbackPodNotFound},
		{"another issuer of the API server", nil, func(t *testing.T, lf *localFixture) string {
			return lf.tokenFor(t, lf.key, "agent-1", "uid-1", func(c map[string]any) { c["iss"] = "https://old-issuer.example" })
		}, fallbackIssuer},
		{"issued in the future (clock skew)", nil, func(t *testing.T, lf *localFixture) string {
			return lf.tokenFor(t, lf.key, "agent-1", "uid-1", func(c map[string]any) {
				c["iat"], c["nbf"] = lf.now.Add(5*time.Minute).Unix(), lf.now.Add(5*time.Minute).Unix()
			})
		}, fallbackNotYetValid},
		{"pod being deleted", func(t *testing.T, lf *localFixture) {
			st := &accountStore{ap: lf.a.verifier.pods.accounts["netpulse/netpulse-agent"]}
			gone := metav1.NewTime(lf.now.Add(-2 * time.Minute))
			require.NoError(t, st.Update(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent-1", UID: "uid-1", DeletionTimestamp: &gone},
				Spec: corev1.PodSpec{NodeName: "node-1"}}))
		}, nil, fallbackPodDeleted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lf := newLocalFixture(t, nil)
			if tc.setup != nil {
				tc.setup(t, lf)
			}
			tok := lf.tokenFor(t, lf.key, "agent-1", "uid-1", nil)
			if tc.token != nil {
				tok = tc.token(t, lf)
			}
			lf.rv.statuses[tok] = good
			_, err := lf.a.Authenticate(context.Background(), bearer(tok))
			require.NoError(t, err, "the API accepts it, so the gateway does")
			assert.EqualValues(t, 1, lf.rv.calls.Load())
			assert.Equal(t, map[string]int64{"fallback/" + tc.why: 1}, lf.local(t))
			assert.Equal(t, map[string]int64{"accepted/reviewed": 1}, lf.requests(t))
		})
	}
}

// Start returns at once and fetches the keys in the background; Shutdown is safe without
// Start and twice (goleak in TestMain checks the refresher and the pod watch stopped).
func TestLocalLifecycle(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Verification = VerificationLocal })
	assert.NotNil(t, f.a.verifier)
	require.NoError(t, f.a.Shutdown(context.Background()))
	require.NoError(t, f.a.Shutdown(context.Background()))
}

// Against an API server that does not answer: Start returns at once (keys and pods in
// the background), requests go to the review path (Unavailable: nothing answers), and
// Shutdown stops the key refresher and the pod watch promptly.
func TestLocalStartDoesNotWait(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Audience, cfg.ServiceAccounts = audience, []string{"netpulse/netpulse-agent"}
	cfg.AuthType, cfg.Kubeconfig = "kubeConfig", "testdata/unreachable.kubeconfig"
	cfg.ReviewTimeout = 200 * time.Millisecond
	require.Equal(t, VerificationLocal, cfg.Verification)
	f := newFixture(t, func(c *Config) { *c = *cfg })
	f.a.reviewer = nil
	start := time.Now()
	require.NoError(t, f.a.Start(context.Background(), nil))
	assert.Less(t, time.Since(start), 500*time.Millisecond, "Start does not wait for the keys or the pods")
	k := newRSAKey(t, "k")
	_, err := f.a.Authenticate(context.Background(), bearer(sign(t, k, podClaims(f.now, time.Hour, "agent-1", "uid-1", "node-1"))))
	require.Error(t, err)
	assert.Equal(t, codes.Unavailable, code(err), "%v", err)
	start = time.Now()
	require.NoError(t, f.a.Shutdown(context.Background()))
	assert.Less(t, time.Since(start), 5*time.Second)
}

// The verifier checks exp, aud and iss on the verified claims itself, not only through the
// structural pre-checks that read them unverified before it.
func TestVerifierChecksClaimsItself(t *testing.T) {
	lf := newLocalFixture(t, func(c *Config) { c.Issuer = testIssuer })
	for name, mutate := range map[string]func(map[string]any){
		"expired": func(c map[string]any) {
			c["exp"], c["iat"], c["nbf"] = lf.now.Add(-time.Second).Unix(), lf.now.Add(-time.Hour).Unix(), lf.now.Add(-time.Hour).Unix()
		},
		"other audience": func(c map[string]any) { c["aud"] = "https://kubernetes.default.svc" },
		"other issuer":   func(c map[string]any) { c["iss"] = "https://evil.example" },
		"no exp":         func(c map[string]any) { delete(c, "exp") },
	} {
		verdict, o, _ := lf.a.verifier.verify(context.Background(), lf.tokenFor(t, lf.key, "agent-1", "uid-1", mutate), lf.now)
		assert.Equal(t, localRejected, verdict, "%s: %s", name, o.detail)
	}
	verdict, o, _ := lf.a.verifier.verify(context.Background(), lf.tokenFor(t, lf.key, "agent-1", "uid-1", nil), lf.now)
	assert.Equal(t, localAccepted, verdict, o.detail)
}

// A relay's token (the gateway's own pod, relay_service_accounts) is accepted without a
// node claim, in the relay role: it observes nothing, and an unscheduled pod's token names
// no node. An agent's token without one is still refused (TestLocalRejections).
func TestLocalRelayTokenNeedsNoNode(t *testing.T) {
	lf := newLocalFixture(t, func(c *Config) {
		c.ServiceAccounts = []string{"netpulse/netpulse-agent", "netpulse/netpulse-gateway"}
		c.AgentServiceAccounts = []string{"netpulse/netpulse-agent"}
		c.RelayServiceAccounts = []string{"netpulse/netpulse-gateway"}
	})
	st := &accountStore{ap: lf.a.verifier.pods.accounts["netpulse/netpulse-gateway"]}
	require.NoError(t, st.Replace([]any{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gw-0", Namespace: "netpulse", UID: "uid-g"},
		Spec: corev1.PodSpec{ServiceAccountName: "netpulse-gateway"}}}, "1"))
	relayClaims := func(node bool) map[string]any {
		c := podClaims(lf.now, time.Hour, "gw-0", "uid-g", "node-1")
		c["sub"] = "system:serviceaccount:netpulse:netpulse-gateway"
		k := c["kubernetes.io"].(map[string]any)
		k["serviceaccount"] = map[string]any{"name": "netpulse-gateway", "uid": "sa-g"}
		if !node {
			delete(k, "node")
		}
		return c
	}
	ctx, err := lf.a.Authenticate(context.Background(), bearer(sign(t, lf.key, relayClaims(false))))
	require.NoError(t, err)
	id, _, ok := identity.FromContext(ctx)
	require.True(t, ok)
	assert.Equal(t, identity.RoleRelay, id.Role)
	assert.Equal(t, "gw-0", id.PodName)
	assert.Empty(t, id.NodeName)
	assert.Zero(t, lf.rv.calls.Load(), "no TokenReview")

	// The agents' account without a node: refused, as before.
	_, err = lf.a.Authenticate(context.Background(), bearer(lf.tokenFor(t, lf.key, "agent-1", "uid-1", func(c map[string]any) {
		delete(c["kubernetes.io"].(map[string]any), "node")
	})))
	require.Error(t, err)
	assert.Contains(t, err.Error(), reasonNotBoundToPod)
}
