// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package deploytest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/netpulse/netpulse/testbed/kubetest"
)

// TestKustomizeImage renders both variants as `kubectl apply -k` would and checks that
// every container runs ghcr.io/netpulse/otelcol-netpulse tagged with builder-config.yaml's
// dist.version (the version `make image` builds and labels), set through the kustomize
// images: entry, and that the gateway's PDB lets unhealthy replicas be evicted.
func TestKustomizeImage(t *testing.T) {
	bins, err := kubetest.FindBinaries()
	require.NoError(t, err)
	if bins.Kubectl == "" {
		t.Fatal("bin/kubectl missing: run make kube-bins")
	}
	root, err := kubetest.RepoRoot()
	require.NoError(t, err)
	var bc struct {
		Dist struct {
			Version string `json:"version"`
		} `json:"dist"`
	}
	b, err := os.ReadFile(filepath.Join(root, "builder-config.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &bc))
	require.NotEmpty(t, bc.Dist.Version)
	want := "ghcr.io/netpulse/otelcol-netpulse:" + bc.Dist.Version

	for variant, workloads := range map[string][]string{
		"agent-gateway": {"DaemonSet/netpulse-agent", "Deployment/netpulse-gateway"},
		"all-in-one":    {"DaemonSet/netpulse-agent"},
	} {
		out, err := exec.Command(bins.Kubectl, "kustomize", kubetest.DeployPath(variant)).CombinedOutput()
		require.NoError(t, err, "kubectl kustomize %s:\n%s", variant, out)
		seen := map[string]bool{}
		dec := k8syaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
		for {
			var obj struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
				Spec struct {
					UnhealthyPodEvictionPolicy string `json:"unhealthyPodEvictionPolicy"`
					Template                   struct {
						Spec struct {
							Containers     []struct{ Image string } `json:"containers"`
							InitContainers []struct{ Image string } `json:"initContainers"`
						} `json:"spec"`
					} `json:"template"`
				} `json:"spec"`
			}
			err := dec.Decode(&obj)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			if obj.Kind == "PodDisruptionBudget" && obj.Metadata.Name == "netpulse-gateway" {
				require.Equal(t, "AlwaysAllow", obj.Spec.UnhealthyPodEvictionPolicy, "%s: the gateway PDB", variant)
			}
			// Every netpulse container (any container of netpulse's workloads, and any
			// container elsewhere that runs netpulse's image) has the version's tag.
			ours := false
			for _, w := range workloads {
				ours = ours || w == obj.Kind+"/"+obj.Metadata.Name
			}
			if ours {
				seen[obj.Kind+"/"+obj.Metadata.Name] = true
			}
			for _, c := range append(obj.Spec.Template.Spec.Containers, obj.Spec.Template.Spec.InitContainers...) {
				if ours || strings.HasPrefix(c.Image, "ghcr.io/netpulse/otelcol-netpulse") {
					require.Equal(t, want, c.Image, "%s: %s %s", variant, obj.Kind, obj.Metadata.Name)
				}
			}
		}
		for _, w := range workloads {
			require.True(t, seen[w], "%s renders no %s", variant, w)
		}
	}
}
