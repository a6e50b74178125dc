/*
Copyright The netpulse Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Names of the API group, version and resource.
const (
	// GroupName is the API group of every netpulse resource.
	GroupName = "netpulse.io"
	// Version is this API version.
	Version = "v1alpha1"
	// Kind is the kind of the PodNetworkHealth resource.
	Kind = "PodNetworkHealth"
	// ListKind is the kind of a list of PodNetworkHealth objects.
	ListKind = "PodNetworkHealthList"
	// Plural is the plural resource name (the URL path segment).
	Plural = "podnetworkhealths"
	// ShortName is the kubectl short name: `kubectl get pnh`.
	ShortName = "pnh"
	// Category is the kubectl category: `kubectl get netpulse`.
	Category = "netpulse"
	// CRDName is the name of the CustomResourceDefinition object.
	CRDName = Plural + "." + GroupName
)

var (
	// SchemeGroupVersion is the group and version of these types (the name client-gen expects).
	SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}
	// GroupVersion is an alias of SchemeGroupVersion.
	GroupVersion = SchemeGroupVersion
	// SchemeGroupVersionResource identifies the PodNetworkHealth resource (for dynamic clients).
	SchemeGroupVersionResource = SchemeGroupVersion.WithResource(Plural)
	// SchemeGroupVersionKind identifies the PodNetworkHealth kind.
	SchemeGroupVersionKind = SchemeGroupVersion.WithKind(Kind)

	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource qualifies an unqualified resource name with this group (listers use it for
// NotFound errors).
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &PodNetworkHealth{}, &PodNetworkHealthList{}, &NetworkCheck{}, &NetworkCheckList{}, &ZoneNetworkHealth{}, &ZoneNetworkHealthList{}, &NetworkHealthSummary{}, &NetworkHealthSummaryList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
