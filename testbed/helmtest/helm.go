// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package helmtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/netpulse/netpulse/testbed/kubetest"
)

// ChartPath is the chart's directory relative to the repository root.
const ChartPath = "deploy/helm/netpulse"

// ReleaseName and Namespace are what the docs install with
// (`helm install netpulse deploy/helm/netpulse -n netpulse`), and what the kustomize
// manifests use.
const (
	ReleaseName = "netpulse"
	Namespace   = "netpulse"
)

// ChartDir returns the chart's directory in this checkout.
func ChartDir() (string, error) {
	root, err := kubetest.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ChartPath), nil
}

// Binary returns bin/helm, the pinned Helm that `make helm` builds from tools/helm, or an
// error that says so when it is missing.
func Binary() (string, error) {
	root, err := kubetest.RepoRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "bin", "helm")
	if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s missing: run make helm (Helm built from tools/helm)", p)
	}
	return p, nil
}

// Template runs `helm template netpulse <chartDir> -n netpulse` with values (nil: the
// chart's defaults) and extra arguments, and returns the rendered manifests.
func Template(helmBin, chartDir string, values map[string]any, args ...string) ([]byte, error) {
	full := append([]string{"template", ReleaseName, chartDir, "--namespace", Namespace}, args...)
	if values != nil {
		f, err := writeValues(values)
		if err != nil {
			return nil, err
		}
		defer os.Remove(f)
		full = append(full, "--values", f)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helmBin, full...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %v: %w\n%s", full, err, stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

// writeValues writes values to a temporary values file and returns its path.
func writeValues(values map[string]any) (string, error) {
	b, err := yaml.Marshal(values)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "netpulse-values-*.yaml")
	if err != nil {
		return "", err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), f.Close()
}

// Object is one rendered Kubernetes object.
type Object = map[string]any

// Decode splits a multi-document YAML stream into objects, skipping empty documents.
func Decode(manifests []byte) ([]Object, error) {
	var objs []Object
	dec := k8syaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		var o Object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(o) > 0 {
			objs = append(objs, o)
		}
	}
}

// Find returns the object of that kind and name, or nil.
func Find(objs []Object, kind, name string) Object {
	for _, o := range objs {
		if o["kind"] == kind && nested(o, "metadata", "name") == name {
			return o
		}
	}
	return nil
}

func nested(o map[string]any, path ...string) any {
	var v any = o
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// RenderCollectorConfigs renders the chart (release netpulse in namespace netpulse) with
// values (nil: the defaults) and writes the collector configurations of its two ConfigMaps
// to outDir/agent.yaml and outDir/gateway.yaml: what the agents and the gateway of a
// `helm install` run. The configurations keep their ${env:...} placeholders, so the
// simulated cluster's environment overrides apply to them as to the files in deploy/.
// With gateway.shards > 1 the agents' configuration exports to one gateway per shard
// (NETPULSE_GATEWAY_ENDPOINT_<i>) and every shard runs the one gateway configuration,
// its index from NETPULSE_SHARD_INDEX (docs/helm.md, Sharding the gateway).
func RenderCollectorConfigs(helmBin, chartDir string, values map[string]any, outDir string) (agentPath, gatewayPath string, err error) {
	out, err := Template(helmBin, chartDir, values)
	if err != nil {
		return "", "", err
	}
	objs, err := Decode(out)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", "", err
	}
	write := func(configMap, key string) (string, error) {
		cm := Find(objs, "ConfigMap", configMap)
		if cm == nil {
			return "", fmt.Errorf("helm template renders no ConfigMap %s", configMap)
		}
		data, _ := nested(cm, "data", key).(string)
		if data == "" {
			return "", fmt.Errorf("ConfigMap %s has no %s", configMap, key)
		}
		p := filepath.Join(outDir, key)
		return p, os.WriteFile(p, []byte(data), 0o644)
	}
	if agentPath, err = write("netpulse-agent-config", "agent.yaml"); err != nil {
		return "", "", err
	}
	if gatewayPath, err = write("netpulse-gateway-config", "gateway.yaml"); err != nil {
		return "", "", err
	}
	return agentPath, gatewayPath, nil
}
