// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package monitoringtest

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// deploy/monitoring/rules.yaml is valid for a stock Prometheus 2.x and its promtool unit
// tests (rules_test.yaml: series that fire each alert and series that must not) pass.
func TestAlertRulesPromtool(t *testing.T) {
	promtool := need(t, "promtool")
	dir := repoPath(t, "deploy", "monitoring")
	check := exec.Command(promtool, "check", "rules", "rules.yaml")
	check.Dir = dir
	out, err := check.CombinedOutput()
	require.NoError(t, err, "promtool check rules:\n%s", out)
	require.Contains(t, string(out), "SUCCESS: 15 rules found")
	cmd := exec.Command(promtool, "test", "rules", "rules_test.yaml")
	cmd.Dir = dir
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "promtool test rules:\n%s", out)
	require.Contains(t, string(out), "SUCCESS")
}

// The PrometheusRule for the Prometheus Operator carries exactly the groups of rules.yaml.
func TestPrometheusRuleMatchesRulesFile(t *testing.T) {
	var rules struct {
		Groups []any `yaml:"groups"`
	}
	raw, err := os.ReadFile(repoPath(t, "deploy", "monitoring", "rules.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, &rules))
	require.NotEmpty(t, rules.Groups)

	var pr struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Spec struct {
			Groups []any `yaml:"groups"`
		} `yaml:"spec"`
	}
	raw, err = os.ReadFile(repoPath(t, "deploy", "monitoring", "prometheusrule.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, &pr))
	require.Equal(t, "monitoring.coreos.com/v1", pr.APIVersion)
	require.Equal(t, "PrometheusRule", pr.Kind)
	require.NotEmpty(t, pr.Metadata.Name)
	require.Equal(t, rules.Groups, pr.Spec.Groups, "prometheusrule.yaml spec.groups must equal rules.yaml groups")
}
