// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

// Package kubeclient builds Kubernetes client configurations for netpulse components from
// one shared piece of component configuration, so the receiver, processor and exporter
// authenticate and rate-limit the same way.
package kubeclient

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/netpulse/netpulse/api/client/clientset/versioned"
)

// AuthType says where credentials come from.
type AuthType string

const (
	// AuthServiceAccount uses the pod's mounted service-account token (in-cluster).
	AuthServiceAccount AuthType = "serviceAccount"
	// AuthKubeConfig uses a kubeconfig file: Config.Kubeconfig, else $KUBECONFIG, else ~/.kube/config.
	AuthKubeConfig AuthType = "kubeConfig"
)

// Config is embedded (squashed) in component configurations.
type Config struct {
	// AuthType: serviceAccount (default) or kubeConfig.
	AuthType AuthType `mapstructure:"auth_type"`
	// Kubeconfig is the kubeconfig path for auth_type kubeConfig.
	Kubeconfig string `mapstructure:"kubeconfig"`
	// Context selects a kubeconfig context (default: current).
	Context string `mapstructure:"context"`
	// QPS and Burst bound this component's request rate to the API server.
	QPS   float32 `mapstructure:"qps"`
	Burst int     `mapstructure:"burst"`
}

// DefaultConfig is in-cluster credentials with a modest request budget.
func DefaultConfig() Config {
	return Config{AuthType: AuthServiceAccount, QPS: 5, Burst: 10}
}

// Check names the offending field. It is deliberately not called Validate: the
// components embed Config (squashed) and call Check from their own Validate, so the
// collector's validation walk does not report every error a second time under a
// "config::" path (a squashed field has no key of its own; the walk would name it by its
// Go field name).
func (c Config) Check() error {
	var errs []error
	switch c.AuthType {
	case AuthServiceAccount, AuthKubeConfig:
	default:
		errs = append(errs, fmt.Errorf("auth_type: %q is not supported; want %q or %q", c.AuthType, AuthServiceAccount, AuthKubeConfig))
	}
	if c.QPS <= 0 || c.QPS > 1000 {
		errs = append(errs, fmt.Errorf("qps: %v out of range (0, 1000]", c.QPS))
	}
	if c.Burst < 1 || c.Burst > 2000 {
		errs = append(errs, fmt.Errorf("burst: %d out of range [1, 2000]", c.Burst))
	}
	if c.AuthType == AuthServiceAccount && c.Kubeconfig != "" {
		errs = append(errs, errors.New("kubeconfig: only used with auth_type kubeConfig"))
	}
	return JoinErrors(errs...)
}

// RESTConfig resolves the credentials. userAgent identifies the component in API server
// logs and audit events.
func (c Config) RESTConfig(userAgent string) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	switch c.AuthType {
	case AuthServiceAccount:
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("auth_type serviceAccount: %w (outside a pod, use auth_type kubeConfig)", err)
		}
	case AuthKubeConfig:
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if c.Kubeconfig != "" {
			rules.ExplicitPath = c.Kubeconfig
		} else if env := os.Getenv("KUBECONFIG"); env != "" {
			rules.ExplicitPath = env
		}
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
			&clientcmd.ConfigOverrides{CurrentContext: c.Context}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("auth_type kubeConfig: %w", err)
		}
	default:
		return nil, fmt.Errorf("auth_type: %q is not supported", c.AuthType)
	}
	cfg.QPS, cfg.Burst = c.QPS, c.Burst
	cfg.UserAgent = userAgent
	// Protobuf is cheaper to decode than JSON for built-in types; CRDs fall back to JSON.
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	return cfg, nil
}

// PodNetworkHealthClient is the typed client of the netpulse.io API on cfg, speaking JSON:
// the CRD has no protobuf encoding, and RESTConfig's client prefers protobuf.
func PodNetworkHealthClient(cfg *rest.Config) (versioned.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.ContentType, c.AcceptContentTypes = "application/json", "application/json"
	return versioned.NewForConfig(c)
}
