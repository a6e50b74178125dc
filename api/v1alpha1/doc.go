/*
Copyright The netpulse Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package v1alpha1 is version v1alpha1 of the netpulse.io API group: the PodNetworkHealth
// resource, one object per observed (source pod -> target) pair, written by the
// pod_network_health exporter and read by operators with kubectl.
//
// The Go types carry kubebuilder markers; controller-gen generates the deepcopy functions
// (zz_generated.deepcopy.go) and the CRD (deploy/crds), and k8s.io/code-generator generates
// the typed clientset, listers and informers under api/client. Run `make generate-api`;
// never edit generated files. The reference documentation is docs/api.md.
//
// +kubebuilder:object:generate=true
// +groupName=netpulse.io
package v1alpha1
