// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package k8stokenauthextension

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"time"
)

// maxTokenBytes bounds what is hashed, parsed and sent for review. Projected
// ServiceAccount tokens are 1-2 KB.
const maxTokenBytes = 16 << 10

// tokenExpiry returns the exp claim of a JWT WITHOUT verifying anything: it only bounds how
// long an accepted review may be cached (never past the token's own expiry) and spares the
// API a review of a token that has visibly expired. The TokenReview is the verification.
func tokenExpiry(token string) (time.Time, error) {
	if len(token) > maxTokenBytes {
		return time.Time{}, errors.New("token too large")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return time.Time{}, errors.New("not a JWT (want header.payload.signature)")
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, errors.New("JWT payload is not base64url")
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return time.Time{}, errors.New("JWT payload is not a JSON object")
	}
	if claims.Exp == nil {
		return time.Time{}, errors.New("JWT has no exp claim (a projected ServiceAccount token always has one)")
	}
	f, err := claims.Exp.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 || f > 1e11 {
		return time.Time{}, errors.New("JWT exp claim is not a plausible NumericDate")
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), nil
}
