// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8stokenauthextension

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensionauth"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netpulse/netpulse/extension/k8stokenauthextension/internal/metadata"
	"github.com/netpulse/netpulse/internal/identity"
	"github.com/netpulse/netpulse/internal/ratelog"
)

// The user.extra keys the API server sets for a token bound to a pod
// (k8s.io/apiserver/pkg/authentication/serviceaccount). node-name and node-uid need
// Kubernetes >= 1.30 (ServiceAccountTokenPodNodeInfo, GA in 1.32); credential-id >= 1.29.
const (
	extraPodName      = "authentication.kubernetes.io/pod-name"
	extraPodUID       = "authentication.kubernetes.io/pod-uid"
	extraNodeName     = "authentication.kubernetes.io/node-name"
	extraNodeUID      = "authentication.kubernetes.io/node-uid"
	extraCredentialID = "authentication.kubernetes.io/credential-id"

	serviceAccountPrefix = "system:serviceaccount:"
)

// Result and reason values of the requests metric, outcomes of the reviews metric.
const (
	resultAccepted    = "accepted"
	resultRejected    = "rejected"
	resultUnavailable = "unavailable"

	reasonCached         = "cached"
	reasonVerified       = "verified"
	reasonStale          = "stale"
	reasonReviewed       = "reviewed"
	reasonMissingToken   = "missing_token"
	reasonMalformedToken = "malformed_token"
	reasonExpiredToken   = "expired_token"
	reasonTokenRejected  = "token_rejected"
	reasonServiceAccount = "service_account_not_allowed"
	reasonNotBoundToPod  = "not_bound_to_pod"
	reasonReviewError    = "review_error"
	reasonOverloaded     = "overloaded"
	reasonPeerLimited    = "peer_limited"
	reasonNotStarted     = "not_started"

	outcomeAuthenticated   = "authenticated"
	outcomeUnauthenticated = "unauthenticated"
	outcomeError           = "error"
)

const (
	logEvery            = 10 * time.Second
	userAgent           = "netpulse-k8s-token-auth"
	authorizationHeader = "authorization"
	bearerScheme        = "bearer "
	errPrefix           = "k8s_token_auth: "
)

// reviewer is the TokenReview client (client-go's TokenReviewInterface; a fake in tests).
type reviewer interface {
	Create(ctx context.Context, tr *authv1.TokenReview, opts metav1.CreateOptions) (*authv1.TokenReview, error)
}

// authenticator is the k8s_token_auth extension.
type authenticator struct {
	cfg      *Config
	logger   *zap.Logger
	tb       *metadata.TelemetryBuilder
	accounts identity.Accounts
	// cache holds accepted identities only, neg rejections only: no rejection evicts an
	// accepted identity.
	cache *tokenCache
	neg   *tokenCache
	peers *peerLimiter
	// verifier is nil with verification: review.
	verifier *verifier
	sem      chan struct{} // bounds reviews in flight
	flight   singleflight.Group
	now      func() time.Time
	// Rejections and review errors are logged at most once per logEvery (burst 3), with
	// the number suppressed since.
	log *ratelog.Logger

	mu       sync.Mutex
	reviewer reviewer // nil until Start
	// ctx is cancelled by Shutdown: reviews in flight stop; wg waits for them.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// bg: the key refresher (local verification).
	bg sync.WaitGroup

	shutdownOnce sync.Once
}

var (
	_ extension.Extension  = (*authenticator)(nil)
	_ extensionauth.Server = (*authenticator)(nil)
)

func newAuthenticator(cfg *Config, set extension.Settings) (*authenticator, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &authenticator{
		cfg:      cfg,
		logger:   set.Logger,
		tb:       tb,
		accounts: identity.NewAccounts(cfg.ServiceAccounts, cfg.agentAccounts()).WithRelays(cfg.RelayServiceAccounts),
		cache:    newTokenCache(cfg.Cache.MaxEntries),
		neg:      newTokenCache(cfg.Cache.MaxNegativeEntries),
		peers:    newPeerLimiter(cfg.PeerReviews.Rate, cfg.PeerReviews.Burst, cfg.Cache.MaxEntries),
		sem:      make(chan struct{}, cfg.MaxConcurrentReviews),
		now:      time.Now,
		log:      ratelog.New(set.Logger, logEvery, 3),
		ctx:      ctx,
		cancel:   cancel,
	}
	if cfg.Verification == VerificationLocal {
		a.verifier = &verifier{
			keys: newIssuerKeys(ctx, cfg.Keys.RefreshInterval, cfg.Keys.MinRefetchInterval, func() time.Time { return a.now() }, func(result string) {
				tb.K8sTokenAuthKeyFetches.Add(context.Background(), 1, metric.WithAttributes(attribute.String("fetch_result", result)))
			}),
			pods:     newBoundPods(cfg.ServiceAccounts),
			audience: cfg.Audience,
			issuer:   cfg.Issuer,
			accounts: a.accounts,
		}
		if err := tb.RegisterK8sTokenAuthBoundPodsCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(a.verifier.pods.len()))
			return nil
		}); err != nil {
			cancel()
			return nil, err
		}
	}
	if err := tb.RegisterK8sTokenAuthCacheEntriesCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(int64(a.cache.len()))
		return nil
	}); err != nil {
		cancel()
		return nil, err
	}
	if err := tb.RegisterK8sTokenAuthNegativeCacheEntriesCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(int64(a.neg.len()))
		return nil
	}); err != nil {
		cancel()
		return nil, err
	}
	return a, nil
}

// Start builds the API client and returns at once: with local verification the issuer's
// keys are fetched and the allowed accounts' pods listed in the background (tokens fall
// back to TokenReview until they are). A missing RBAC grant shows in the first review or
// fetch (logged, counted, answered Unavailable or reviewed).
func (a *authenticator) Start(context.Context, component.Host) error {
	restCfg, err := a.cfg.RESTConfig(userAgent)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ctx.Err() != nil {
		return nil // shut down already
	}
	if v := a.verifier; v != nil {
		if err := v.pods.start(restCfg, a.logger); err != nil {
			return err
		}
		rc := cs.Discovery().RESTClient()
		v.keys.setGetter(func(ctx context.Context, path string) ([]byte, error) {
			// The JWKS is served as application/jwk-set+json only (406 otherwise).
			return rc.Get().AbsPath(path).SetHeader("Accept", "application/json, application/jwk-set+json").DoRaw(ctx)
		})
		a.bg.Add(1)
		go func() {
			defer a.bg.Done()
			v.keys.run(a.ctx, func(err error) {
				a.log.Log(zap.WarnLevel, "k8s_token_auth: cannot fetch the service-account issuer's keys; tokens are verified with TokenReview meanwhile (check the RBAC grant: system:service-account-issuer-discovery)", zap.Error(err))
			})
		}()
	}
	a.reviewer = cs.AuthenticationV1().TokenReviews()
	return nil
}

// Shutdown stops reviews in flight. Safe without Start and twice.
func (a *authenticator) Shutdown(context.Context) error {
	a.shutdownOnce.Do(func() {
		a.mu.Lock()
		a.cancel()
		a.reviewer = nil
		a.mu.Unlock()
		a.wg.Wait()
		if v := a.verifier; v != nil {
			a.bg.Wait()
			v.keys.close()
			v.pods.stop()
		}
		a.tb.Shutdown()
	})
	return nil
}

// Authenticate implements extensionauth.Server: it verifies the bearer token and returns a
// context whose client.Info carries the identity (Auth and the reserved Metadata keys).
// Rejections are gRPC Unauthenticated; when the API cannot answer, Unavailable (the
// OTLP exporter retries those).
func (a *authenticator) Authenticate(ctx context.Context, headers map[string][]string) (context.Context, error) {
	o, result, reason := a.authenticate(ctx, headers)
	a.tb.K8sTokenAuthRequests.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("result", result), attribute.String("reason", reason)))
	switch result {
	case resultRejected:
		a.log.Log(zap.InfoLevel, "k8s_token_auth: request rejected", zap.String("reason", reason), zap.String("detail", o.detail), peer(ctx))
		return ctx, status.Error(codes.Unauthenticated, errPrefix+reason)
	case resultUnavailable:
		return ctx, status.Error(codes.Unavailable, errPrefix+reason+"; retry")
	}
	cl := client.FromContext(ctx)
	cl.Auth = identity.NewAuthData(o.id)
	cl.Metadata = identity.WithIdentity(cl.Metadata, o.id)
	return client.NewContext(ctx, cl), nil
}

func peer(ctx context.Context) zap.Field {
	if addr := client.FromContext(ctx).Addr; addr != nil {
		return zap.String("peer", addr.String())
	}
	return zap.Skip()
}

// authenticate returns the outcome with the requests metric's result and reason.
func (a *authenticator) authenticate(ctx context.Context, headers map[string][]string) (outcome, string, string) {
	token, reason, detail := bearerToken(headers)
	if reason != "" {
		return outcome{reason: reason, detail: detail}, resultRejected, reason
	}
	key := tokenKey(sha256.Sum256([]byte(token)))
	now := a.now()
	cached, fresh, stale := a.cache.get(key, now)
	if (fresh || stale) && cached.local {
		// Accepted locally: only while its pod is still there (revocation follows the
		// pod's deletion as fast as the watch sees it, not max_ttl).
		if v, _, _ := a.verifier.checkPod(cached.id, now); v != localAccepted {
			a.cache.remove(key)
			cached, fresh, stale = outcome{}, false, false
		}
	}
	if fresh {
		return cached, resultAccepted, reasonCached
	}
	if !stale {
		if rejected, fresh, _ := a.neg.get(key, now); fresh {
			return rejected, resultRejected, rejected.reason
		}
	}
	// With a stale outcome at hand, an API that cannot answer does not fail the request.
	unavailable := func(reason string) (outcome, string, string) {
		if stale {
			a.log.Log(zap.WarnLevel, "k8s_token_auth: the API cannot review tokens; accepting an identity reviewed before (cache.stale_if_error)",
				zap.Stringer("identity", cached.id), zap.String("cause", reason))
			return cached, resultAccepted, reasonStale
		}
		return outcome{}, resultUnavailable, reason
	}
	// Structural checks: what the API (or judge) would reject anyway costs no review, and
	// nothing is cached for it (parsing is cheaper than a cache entry).
	cl, err := parseClaims(token)
	if err != nil {
		return outcome{reason: reasonMalformedToken, detail: err.Error()}, resultRejected, reasonMalformedToken
	}
	exp := cl.Exp
	if !exp.After(now) {
		// The API would reject it too; no review is spent on it.
		return outcome{reason: reasonExpiredToken, detail: "expired at " + exp.UTC().Format(time.RFC3339)}, resultRejected, reasonExpiredToken
	}
	if reason, detail := precheck(cl, a.cfg.Audience, a.cfg.Issuer, func(ns, name string) bool {
		return a.accounts.RoleOf(ns, name) != identity.RoleNone
	}); reason != "" {
		return outcome{reason: reason, detail: detail}, resultRejected, reason
	}
	a.mu.Lock()
	rv := a.reviewer
	a.mu.Unlock()
	if rv == nil {
		return outcome{}, resultUnavailable, reasonNotStarted
	}
	if a.verifier != nil {
		verdict, o, why := a.verifier.verify(ctx, token, now)
		a.tb.K8sTokenAuthLocalVerifications.Add(context.Background(), 1, metric.WithAttributes(
			attribute.String("verdict", verdict.String()), attribute.String("reason", why+o.reason)))
		switch verdict {
		case localAccepted:
			a.neg.remove(key)
			fresh := minTime(now.Add(a.cfg.Cache.MaxTTL), exp)
			a.cache.put(key, o, fresh, minTime(fresh.Add(a.cfg.Cache.StaleIfError), exp), now)
			return o, resultAccepted, reasonVerified
		case localRejected:
			a.cache.remove(key)
			a.neg.put(key, o, now.Add(a.cfg.Cache.NegativeTTL), time.Time{}, now)
			return o, resultRejected, o.reason
		}
		// Undecided: the API decides, as with verification: review.
	}
	// One review per token at a time: concurrent requests with the same token share it.
	// A token not accepted before costs its peer one review of its bucket (the request that
	// starts the review pays; those sharing it do not); one accepted before (stale) is an
	// agent renewing and is never limited.
	peerKey := peerOf(ctx)
	limited := !stale && peerKey != ""
	ch := a.flight.DoChan(string(key[:]), func() (any, error) {
		if limited {
			if !a.peers.acquire(peerKey, a.now()) {
				return nil, errPeerLimited
			}
			defer a.peers.release(peerKey)
		}
		return a.review(rv, token, key, exp)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			if errors.Is(r.Err, errOverloaded) {
				return unavailable(reasonOverloaded)
			}
			if errors.Is(r.Err, errPeerLimited) {
				return outcome{}, resultUnavailable, reasonPeerLimited
			}
			return unavailable(reasonReviewError)
		}
		o := r.Val.(outcome)
		if o.reason != "" {
			return o, resultRejected, o.reason
		}
		return o, resultAccepted, reasonReviewed
	case <-ctx.Done():
		// The review goes on and its outcome is cached for the client's retry.
		return unavailable(reasonOverloaded)
	}
}

var (
	errOverloaded  = errors.New("too many token reviews in flight")
	errPeerLimited = errors.New("the peer's token reviews are rate-limited")
)

// peerOf is the caller's address without its port; "" when the transport gave none (every
// OTLP receiver gives one; a caller without one is not peer-limited).
func peerOf(ctx context.Context) string {
	addr := client.FromContext(ctx).Addr
	if addr == nil {
		return ""
	}
	if h, _, err := net.SplitHostPort(addr.String()); err == nil {
		return h
	}
	return addr.String()
}

// review runs one TokenReview (bounded by MaxConcurrentReviews and ReviewTimeout) and
// caches its outcome. It returns an error only when the API gave no answer: nothing is
// cached then.
func (a *authenticator) review(rv reviewer, token string, key tokenKey, exp time.Time) (any, error) {
	// Registered under mu, so Shutdown (which cancels a.ctx under mu, then waits) either
	// waits for this review or has already made it give up.
	a.mu.Lock()
	if a.ctx.Err() != nil {
		a.mu.Unlock()
		return nil, errOverloaded
	}
	a.wg.Add(1)
	a.mu.Unlock()
	defer a.wg.Done()
	ctx, cancel := context.WithTimeout(a.ctx, a.cfg.ReviewTimeout)
	defer cancel()
	select {
	case a.sem <- struct{}{}:
		defer func() { <-a.sem }()
	case <-ctx.Done():
		return nil, errOverloaded
	}
	tr, err := rv.Create(ctx, &authv1.TokenReview{
		Spec: authv1.TokenReviewSpec{Token: token, Audiences: []string{a.cfg.Audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		a.tb.K8sTokenAuthTokenReviews.Add(context.Background(), 1, metric.WithAttributes(attribute.String("outcome", outcomeError)))
		a.log.Log(zap.WarnLevel, "k8s_token_auth: TokenReview failed; answering Unavailable (check the API server and the RBAC grant: create on authentication.k8s.io tokenreviews)", zap.Error(err))
		return nil, err
	}
	o := judge(tr.Status, a.cfg.Audience, a.accounts)
	result := outcomeAuthenticated
	if !tr.Status.Authenticated {
		result = outcomeUnauthenticated
	}
	a.tb.K8sTokenAuthTokenReviews.Add(context.Background(), 1, metric.WithAttributes(attribute.String("outcome", result)))
	now := a.now()
	if o.reason != "" {
		// An answer of the API wins over a stale acceptance.
		a.cache.remove(key)
		a.neg.put(key, o, now.Add(a.cfg.Cache.NegativeTTL), time.Time{}, now)
	} else {
		a.neg.remove(key)
		fresh := minTime(now.Add(a.cfg.Cache.MaxTTL), exp)
		a.cache.put(key, o, fresh, minTime(fresh.Add(a.cfg.Cache.StaleIfError), exp), now)
	}
	return o, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// bearerToken extracts the token of the one "authorization: Bearer <token>" header
// (gRPC metadata keys are lower case, HTTP headers canonical). It returns a rejection
// reason and detail instead when there is none, several, or a malformed one.
func bearerToken(headers map[string][]string) (token, reason, detail string) {
	var values []string
	for k, v := range headers {
		if strings.EqualFold(k, authorizationHeader) {
			values = append(values, v...)
		}
	}
	switch {
	case len(values) == 0:
		return "", reasonMissingToken, "no authorization header"
	case len(values) > 1:
		return "", reasonMalformedToken, "more than one authorization header"
	}
	v := values[0]
	if len(v) < len(bearerScheme) || !strings.EqualFold(v[:len(bearerScheme)], bearerScheme) {
		return "", reasonMalformedToken, "authorization scheme is not Bearer"
	}
	token = strings.TrimSpace(v[len(bearerScheme):])
	switch {
	case token == "":
		return "", reasonMissingToken, "empty bearer token"
	case len(token) > maxTokenBytes:
		return "", reasonMalformedToken, fmt.Sprintf("bearer token longer than %d bytes", maxTokenBytes)
	}
	return token, "", ""
}

// judge turns a TokenReview status into an outcome: the API must have authenticated the
// token for audience (status.audiences), as an allowed service account (whose role the
// identity then carries), bound to a pod on a node (status.user.extra).
func judge(st authv1.TokenReviewStatus, audience string, accounts identity.Accounts) outcome {
	if !st.Authenticated {
		detail := "the API server did not authenticate the token for the audience"
		if st.Error != "" {
			detail += ": " + st.Error
		}
		return outcome{reason: reasonTokenRejected, detail: detail}
	}
	if !slices.Contains(st.Audiences, audience) {
		return outcome{reason: reasonTokenRejected, detail: fmt.Sprintf("audiences %q do not include %q", st.Audiences, audience)}
	}
	rest, ok := strings.CutPrefix(st.User.Username, serviceAccountPrefix)
	ns, name, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || ns == "" || name == "" {
		return outcome{reason: reasonServiceAccount, detail: fmt.Sprintf("user %q is not a service account", st.User.Username)}
	}
	role := accounts.RoleOf(ns, name)
	if role == identity.RoleNone {
		return outcome{reason: reasonServiceAccount, detail: fmt.Sprintf("service account %s/%s is not allowed", ns, name)}
	}
	one := func(k string) string {
		if v := st.User.Extra[k]; len(v) == 1 {
			return v[0]
		}
		return ""
	}
	id := identity.Identity{
		Namespace: ns, ServiceAccount: name,
		PodName: one(extraPodName), PodUID: one(extraPodUID),
		NodeName: one(extraNodeName), NodeUID: one(extraNodeUID),
		CredentialID: one(extraCredentialID),
		Groups:       append([]string(nil), st.User.Groups...),
		Role:         role,
	}
	if !id.Complete() {
		return outcome{reason: reasonNotBoundToPod, detail: fmt.Sprintf(
			"token of %s/%s carries no pod name, pod UID and node name (a projected token bound to the pod, Kubernetes >= 1.30)", ns, name)}
	}
	return outcome{id: id}
}
