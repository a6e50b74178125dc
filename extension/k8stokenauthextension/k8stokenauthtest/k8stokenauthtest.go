// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package k8stokenauthtest helps tests of the k8s_token_auth extension and of pipelines
// behind it, against the project's real local control plane (testbed/kubetest): agent
// pods bound to Node objects, tokens from the TokenRequest API, a throw-away TLS PKI for
// the OTLP hop, re-signed tokens for cases the TokenRequest API refuses to mint (expired),
// and the API server's own count of TokenReview calls.
package k8stokenauthtest // import "github.com/netpulse/netpulse/extension/k8stokenauthextension/k8stokenauthtest"

import (
	"bufio"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/component"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netpulse/netpulse/testbed/testpki"
)

// TLS is a throw-away CA and a serving certificate (for 127.0.0.1, ::1, localhost,
// netpulse-gateway.netpulse.svc and any extra hosts) written as PEM files.
type TLS = testpki.Serving

// WriteTLS generates the PKI into dir (testbed/testpki). hosts are extra IP addresses or
// DNS names the serving certificate is valid for (the address agents dial).
func WriteTLS(dir string, hosts ...string) (*TLS, error) {
	return testpki.WriteServing(dir, "netpulse-gateway",
		append([]string{"127.0.0.1", "::1", "localhost", "netpulse-gateway.netpulse.svc"}, hosts...)...)
}

// RestrictedPodSpec passes Pod Security "restricted" (the netpulse namespace enforces it).
func RestrictedPodSpec(serviceAccount, node string) corev1.PodSpec {
	yes, no := true, false
	return corev1.PodSpec{
		ServiceAccountName: serviceAccount,
		NodeName:           node,
		SecurityContext:    &corev1.PodSecurityContext{RunAsNonRoot: &yes, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers: []corev1.Container{{Name: "agent", Image: "example.invalid/otelcol-netpulse:0", SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}}},
	}
}

// CreateAgentPod makes sure the Node and the ServiceAccount exist and creates the pod
// namespace/name on that node under that service account (the namespace must exist).
func CreateAgentPod(ctx context.Context, cs kubernetes.Interface, namespace, serviceAccount, name, node string) (*corev1.Pod, error) {
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create node %s: %w", node, err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: serviceAccount}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create service account %s/%s: %w", namespace, serviceAccount, err)
	}
	pod, err := cs.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app.kubernetes.io/name": "netpulse-agent"}},
		Spec:       RestrictedPodSpec(serviceAccount, node),
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s/%s: %w", namespace, name, err)
	}
	return pod, nil
}

// PodToken mints a token of the pod's service account bound to the pod, for audiences,
// valid for seconds (the API's minimum is 600) - what the kubelet writes into a projected
// serviceAccountToken volume.
func PodToken(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, audiences []string, seconds int64) (string, error) {
	return requestToken(ctx, cs, pod.Namespace, pod.Spec.ServiceAccountName, audiences, seconds,
		&authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID})
}

// UnboundToken mints a token of the service account bound to no object.
func UnboundToken(ctx context.Context, cs kubernetes.Interface, namespace, serviceAccount string, audiences []string, seconds int64) (string, error) {
	return requestToken(ctx, cs, namespace, serviceAccount, audiences, seconds, nil)
}

func requestToken(ctx context.Context, cs kubernetes.Interface, namespace, serviceAccount string, audiences []string, seconds int64, bound *authv1.BoundObjectReference) (string, error) {
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: &seconds, BoundObjectRef: bound},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token request for %s/%s: %w", namespace, serviceAccount, err)
	}
	return tr.Status.Token, nil
}

// Claims decodes a JWT's payload without verifying it.
func Claims(token string) (map[string]any, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errors.New("not a JWT")
	}
	p, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	return claims, json.Unmarshal(p, &claims)
}

// Resign returns token with its claims changed by mutate and signed again (RS256, same
// header) with the RSA key in keyFile: the control plane's service-account signing key
// (kubetest writes it to <Dir>/sa.key). It mints what the TokenRequest API will not,
// such as a token that has already expired; signed with the real key, it differs from a
// genuine token only in what mutate changed.
func Resign(token, keyFile string, mutate func(claims map[string]any)) (string, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", errors.New("not a JWT")
	}
	claims, err := Claims(token)
	if err != nil {
		return "", err
	}
	mutate(claims)
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	pemBytes, err := os.ReadFile(keyFile)
	if err != nil {
		return "", err
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return "", fmt.Errorf("%s: no PEM block", keyFile)
	}
	key, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	if err != nil {
		return "", fmt.Errorf("%s: %w", keyFile, err)
	}
	signed := parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload)
	digest := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		return "", err
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// ReviewDirectly asks the API server itself (as the admin) whether it authenticates
// token for audiences: the ground truth the extension's answers are compared with.
func ReviewDirectly(ctx context.Context, cs kubernetes.Interface, token string, audiences []string) (authv1.TokenReviewStatus, error) {
	tr, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authv1.TokenReview{
		Spec: authv1.TokenReviewSpec{Token: token, Audiences: audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return authv1.TokenReviewStatus{}, err
	}
	return tr.Status, nil
}

// TokenReviewsServed is the API server's own count of TokenReview creations
// (apiserver_request_total, resource tokenreviews, verb POST), read from /metrics with an
// admin client: an independent count of the reviews the extension made.
func TokenReviewsServed(ctx context.Context, cs kubernetes.Interface) (int, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="tokenreviews"`) || !strings.Contains(line, `verb="POST"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("parse %q: %w", line, err)
		}
		n += int(v)
	}
	return n, sc.Err()
}

// Host is a component.Host holding extensions (what a collector's service gives its
// components).
type Host struct {
	Extensions map[component.ID]component.Component
}

var _ component.Host = (*Host)(nil)

// GetExtensions implements component.Host.
func (h *Host) GetExtensions() map[component.ID]component.Component { return h.Extensions }
