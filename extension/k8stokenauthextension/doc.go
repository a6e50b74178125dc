// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package k8stokenauthextension implements the k8s_token_auth extension: a server
// authenticator (extensionauth.Server) for OTLP receivers that verifies the caller's
// projected ServiceAccount token with the Kubernetes TokenReview API and exposes the
// pod-bound identity the token carries (namespace, service account, pod name and UID,
// node) on the request's client information. See README.md and package identity.
//
//go:generate mdatagen metadata.yaml
package k8stokenauthextension // import "github.com/netpulse/netpulse/extension/k8stokenauthextension"
