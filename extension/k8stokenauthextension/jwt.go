// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8stokenauthextension

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// maxTokenBytes bounds what is hashed, parsed and sent for review. Projected
// ServiceAccount tokens are 1-2 KB.
const maxTokenBytes = 16 << 10

// claims are the JWT claims read WITHOUT verifying anything. They only ever reject a
// token before a review is spent on it (a token the API would reject too: the wrong shape,
// expired, for another audience or issuer, of a service account that is not allowed) and
// bound how long an accepted review may be cached (never past exp). Nothing is accepted
// from them: the TokenReview is the verification.
type claims struct {
	Exp time.Time
	Aud []string
	Iss string
	Sub string
}

// parseClaims reads a JWT's header and claims: three non-empty base64url parts, a JSON
// header naming a signing algorithm (never "none"), a JSON payload with a plausible exp.
func parseClaims(token string) (claims, error) {
	if len(token) > maxTokenBytes {
		return claims{}, errors.New("token too large")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return claims{}, errors.New("not a JWT (want header.payload.signature)")
	}
	if _, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[2], "=")); err != nil {
		return claims{}, errors.New("JWT signature is not base64url")
	}
	header, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[0], "="))
	if err != nil {
		return claims{}, errors.New("JWT header is not base64url")
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if err := json.Unmarshal(header, &h); err != nil {
		return claims{}, errors.New("JWT header is not a JSON object")
	}
	if h.Alg == "" || strings.EqualFold(h.Alg, "none") {
		return claims{}, errors.New("JWT header names no signing algorithm")
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return claims{}, errors.New("JWT payload is not base64url")
	}
	var raw struct {
		Exp *json.Number    `json:"exp"`
		Aud json.RawMessage `json:"aud"`
		Iss string          `json:"iss"`
		Sub string          `json:"sub"`
	}
	if err := json.Unmarshal(payload, &raw); err != nil {
		return claims{}, errors.New("JWT payload is not a JSON object with string iss and sub")
	}
	if raw.Exp == nil {
		return claims{}, errors.New("JWT has no exp claim (a projected ServiceAccount token always has one)")
	}
	f, err := raw.Exp.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 || f > 1e11 {
		return claims{}, errors.New("JWT exp claim is not a plausible NumericDate")
	}
	sec, frac := math.Modf(f)
	c := claims{Exp: time.Unix(int64(sec), int64(frac*1e9)), Iss: raw.Iss, Sub: raw.Sub}
	// aud is a string or an array of strings (RFC 7519 4.1.3).
	if len(raw.Aud) > 0 && string(raw.Aud) != "null" {
		var one string
		if err := json.Unmarshal(raw.Aud, &one); err == nil {
			c.Aud = []string{one}
		} else if err := json.Unmarshal(raw.Aud, &c.Aud); err != nil {
			return claims{}, errors.New("JWT aud claim is neither a string nor an array of strings")
		}
	}
	return c, nil
}

// tokenExpiry returns the exp claim of a JWT without verifying anything (parseClaims).
func tokenExpiry(token string) (time.Time, error) {
	c, err := parseClaims(token)
	return c.Exp, err
}

// precheck rejects, before any review, a token whose claims the API would refuse or whose
// identity this gateway would: another audience, another issuer (when issuer is known), a
// subject that is not an allowed service account. It returns a rejection reason and detail,
// or "" to review the token.
func precheck(c claims, audience, issuer string, allowed func(ns, name string) bool) (reason, detail string) {
	if !slices.Contains(c.Aud, audience) {
		return reasonTokenRejected, fmt.Sprintf("token audiences %q do not include %q (checked before review)", c.Aud, audience)
	}
	if issuer != "" && c.Iss != issuer {
		return reasonTokenRejected, fmt.Sprintf("token issuer %q is not the cluster's %q (checked before review)", c.Iss, issuer)
	}
	rest, ok := strings.CutPrefix(c.Sub, serviceAccountPrefix)
	ns, name, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || ns == "" || name == "" {
		return reasonServiceAccount, fmt.Sprintf("token subject %q is not a service account (checked before review)", c.Sub)
	}
	if !allowed(ns, name) {
		return reasonServiceAccount, fmt.Sprintf("service account %s/%s is not allowed (checked before review)", ns, name)
	}
	return "", ""
}
