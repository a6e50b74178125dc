// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package simcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netpulse/netpulse/testbed/testpki"
)

// GatewayTLSSecret is the Secret deploy/ mounts into the gateway (tls.crt, tls.key) and,
// its ca.crt only, into the agents.
const GatewayTLSSecret = "netpulse-gateway-tls"

// setupGatewayTLS plays cert-manager: a throw-away CA and a serving certificate for the
// address agents dial (HostIPv4) and the Service's names, as files for the processes and as
// the Secret the manifests name.
func (c *Cluster) setupGatewayTLS(ctx context.Context) error {
	dir := filepath.Join(c.Dir, "tls")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tls, err := testpki.WriteServing(dir, "netpulse-gateway", append([]string{"127.0.0.1", "::1", "localhost", "netpulse-gateway.netpulse.svc"}, gatewayIPv4s()...)...)
	if err != nil {
		return fmt.Errorf("simcluster: gateway TLS: %w", err)
	}
	c.gatewayTLS = tls
	data := map[string][]byte{}
	for key, file := range map[string]string{"tls.crt": tls.CertFile, "tls.key": tls.KeyFile, "ca.crt": tls.CAFile} {
		if data[key], err = os.ReadFile(file); err != nil {
			return err
		}
	}
	_, err = c.Client.CoreV1().Secrets(Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: GatewayTLSSecret, Namespace: Namespace},
		Type:       corev1.SecretTypeTLS,
		Data:       data,
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("simcluster: create Secret %s: %w", GatewayTLSSecret, err)
	}
	return nil
}

// projectedToken is a serviceAccountToken source of a pod's projected volume.
type projectedToken struct {
	audience string
	seconds  int64
}

// podTokenSource finds the projected ServiceAccount token the pod mounts (the DaemonSet's
// gateway-token volume): audience and lifetime.
func podTokenSource(pod *corev1.Pod) (projectedToken, bool) {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if t := src.ServiceAccountToken; t != nil {
				pt := projectedToken{audience: t.Audience, seconds: 3600}
				if t.ExpirationSeconds != nil {
					pt.seconds = *t.ExpirationSeconds
				}
				return pt, true
			}
		}
	}
	return projectedToken{}, false
}

// writePodToken plays the kubelet's token projection: a token of the pod's service account
// bound to the pod (and so to its node), for the volume's audience and lifetime, written
// atomically to path. It returns when the token should be refreshed (80 % of its life, as
// the kubelet does).
func (c *Cluster) writePodToken(ctx context.Context, pod *corev1.Pod, src projectedToken, path string) (time.Time, error) {
	tr, err := c.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{
			Audiences:         []string{src.audience},
			ExpirationSeconds: &src.seconds,
			BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return time.Time{}, fmt.Errorf("simcluster: token for pod %s: %w", pod.Name, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return time.Time{}, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(tr.Status.Token), 0o600); err != nil {
		return time.Time{}, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return time.Time{}, err
	}
	life := time.Until(tr.Status.ExpirationTimestamp.Time)
	return time.Now().Add(life * 8 / 10), nil
}

// GatewayCAFile is the CA certificate agents verify the gateway's serving certificate with.
func (c *Cluster) GatewayCAFile() string { return c.gatewayTLS.CAFile }
