// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Apply server-side-applies every object in the given YAML files or directories (all
// *.yaml files in them except kustomization.yaml), as kubectl apply would, and waits for
// CustomResourceDefinitions among them to become Established. Tests use it to install the
// project's own deploy/ manifests, so the tests exercise exactly what users apply.
func Apply(ctx context.Context, cfg *rest.Config, paths ...string) error {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		matches, err := filepath.Glob(filepath.Join(p, "*.yaml"))
		if err != nil {
			return err
		}
		for _, m := range matches {
			if filepath.Base(m) != "kustomization.yaml" {
				files = append(files, m)
			}
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var crds []string
	for _, f := range files {
		objs, err := DecodeFile(f)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			gvk := obj.GroupVersionKind()
			mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if meta.IsNoMatchError(err) {
				mapper.Reset() // a CRD applied just before
				mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			}
			if err != nil {
				return fmt.Errorf("%s: %s %s: %w", f, gvk.Kind, obj.GetName(), err)
			}
			var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
			if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
				ri = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
			}
			if _, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "kubetest", Force: true}); err != nil {
				return fmt.Errorf("%s: apply %s %s: %w", f, gvk.Kind, obj.GetName(), err)
			}
			if gvk.Kind == "CustomResourceDefinition" {
				crds = append(crds, obj.GetName())
			}
		}
	}
	if len(crds) == 0 {
		return nil
	}
	ax, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, name := range crds {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			crd, err := ax.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not Established: %w", name, err)
		}
	}
	return nil
}

// DecodeFile reads every object of a multi-document YAML (or JSON) file.
func DecodeFile(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

// DeployPath returns <repo>/deploy/<parts...>.
func DeployPath(parts ...string) string {
	root, err := RepoRoot()
	if err != nil {
		return filepath.Join(append([]string{"deploy"}, parts...)...)
	}
	return filepath.Join(append([]string{root, "deploy"}, parts...)...)
}
