// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package kubeclient

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/netpulse/netpulse/internal/kubetest"
)

func TestValidateNamesFields(t *testing.T) {
	c := DefaultConfig()
	require.NoError(t, c.Check())
	c.AuthType = "token"
	c.QPS = 0
	c.Burst = 0
	err := c.Check()
	require.ErrorContains(t, err, `auth_type: "token" is not supported`)
	require.ErrorContains(t, err, "qps: 0 out of range")
	require.ErrorContains(t, err, "burst: 0 out of range")
}

func TestKubeConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, kubetest.WriteKubeconfig(&rest.Config{Host: "https://192.0.2.1:6443", BearerToken: "t"}, path))
	c := Config{AuthType: AuthKubeConfig, Kubeconfig: path, QPS: 7, Burst: 9}
	cfg, err := c.RESTConfig("netpulse-test")
	require.NoError(t, err)
	require.Equal(t, "https://192.0.2.1:6443", cfg.Host)
	require.Equal(t, "t", cfg.BearerToken)
	require.Equal(t, float32(7), cfg.QPS)
	require.Equal(t, 9, cfg.Burst)
	require.Equal(t, "netpulse-test", cfg.UserAgent)

	_, err = Config{AuthType: AuthKubeConfig, Kubeconfig: filepath.Join(t.TempDir(), "missing"), QPS: 1, Burst: 1}.RESTConfig("x")
	require.ErrorContains(t, err, "auth_type kubeConfig")
}

func TestInClusterOutsideAPod(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, err := DefaultConfig().RESTConfig("x")
	require.ErrorContains(t, err, "use auth_type kubeConfig")
}
