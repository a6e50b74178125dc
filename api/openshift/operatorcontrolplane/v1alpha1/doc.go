/*
Copyright The netpulse Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Package v1alpha1 holds the types of OpenShift's PodNetworkConnectivityCheck
// (controlplane.operator.openshift.io/v1alpha1), which netpulse can serve: run the checks
// and write their status with the semantics OpenShift's own tooling reads.
//
// The types are written here from OpenShift's published schema
// (github.com/openshift/api, operatorcontrolplane/v1alpha1/types_conditioncheck.go, Apache-2.0),
// because the Go module proxy this project builds with does not serve github.com/openshift/api
// at a usable version (only v3.9.0+incompatible; master and commit pseudo-versions are
// refused). The JSON field names, types and markers are OpenShift's; only the Go type of
// tlsClientCert is declared locally (OpenShift's config/v1 SecretNameReference is a struct
// with one field, name). controller-gen generates the deepcopy functions and, for tests and
// clusters without OpenShift, the CRD (testdata/crds). On OpenShift the cluster's own CRD is
// used.
//
// +kubebuilder:object:generate=true
// +groupName=controlplane.operator.openshift.io
package v1alpha1
