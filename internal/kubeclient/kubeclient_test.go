// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package kubeclient

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"k8s.io/client-go/rest"

	"github.com/netpulse/netpulse/testbed/kubetest"
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

type testLeaf struct {
	A int `mapstructure:"a"`
	B int `mapstructure:"b"`
}

func (l testLeaf) Validate() error {
	var errs []error
	if l.A < 0 {
		errs = append(errs, fmt.Errorf("a: %d is negative", l.A))
	}
	if l.B < 0 {
		errs = append(errs, fmt.Errorf("b: %d is negative", l.B))
	}
	return JoinErrors(errs...)
}

type testRoot struct {
	Config `mapstructure:",squash"`
	Leaf   testLeaf   `mapstructure:"leaf"`
	List   []testLeaf `mapstructure:"list"`
}

var errRoot = errors.New("root: one more")

func (r *testRoot) Validate() error {
	return JoinErrors(r.Check(), errRoot)
}

// Every problem reads below its whole path, however many one struct has.
func TestJoinErrorsUnderTheValidationWalk(t *testing.T) {
	require.NoError(t, JoinErrors())
	require.NoError(t, JoinErrors(nil, errors.Join(nil)))
	one := errors.New("a: bad")
	require.Same(t, one, JoinErrors(nil, one), "a single problem is returned as it is")

	root := &testRoot{
		Config: Config{AuthType: "token", QPS: 5, Burst: 10},
		Leaf:   testLeaf{A: -1, B: -2},
		List:   []testLeaf{{}, {B: -3}},
	}
	err := confmap.Validate(root)
	require.Equal(t, `2 errors:
  auth_type: "token" is not supported; want "serviceAccount" or "kubeConfig"
  root: one more
leaf: 2 errors:
  a: -1 is negative
  b: -2 is negative
list::1: b: -3 is negative`, err.Error())
	require.Equal(t, []string{
		`auth_type: "token" is not supported; want "serviceAccount" or "kubeConfig"`,
		"root: one more",
		"leaf: a: -1 is negative",
		"leaf: b: -2 is negative",
		"list::1: b: -3 is negative",
	}, Messages(err))
	require.ErrorIs(t, err, errRoot, "errors.Is sees each problem")

	multi := JoinErrors(errors.New("x: first line\nsecond line"), errors.New("y: bad"))
	require.Equal(t, "2 errors:\n  x: first line\n    second line\n  y: bad", multi.Error())
	require.Equal(t, []string{"x: first line\nsecond line", "y: bad"}, Messages(multi))
}

func TestMatchProblems(t *testing.T) {
	err := JoinErrors(errors.New("a: bad"), errors.New("b: worse"))
	require.NoError(t, MatchProblems(err, "a: bad", "b: "))
	require.ErrorContains(t, MatchProblems(nil, "a"), "no error")
	require.ErrorContains(t, MatchProblems(err, "bad"), `no problem begins with "bad"`)
	require.ErrorContains(t, MatchProblems(JoinErrors(errors.New("a: bad"), errors.New("a: bad")), "a: bad"), `reported twice: "a: bad"`)
}
