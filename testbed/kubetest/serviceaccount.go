// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package kubetest

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

var metav1GetOptions = metav1.GetOptions{}

// ServiceAccountConfig makes sure the service account namespace/name exists and returns a
// client configuration that authenticates as it with a bound token from the TokenRequest
// API, exactly as a pod's projected token would. It grants nothing: combine it with
// Grant or with RBAC objects applied from deploy/.
func (cp *ControlPlane) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	if err := EnsureNamespace(ctx, cs, namespace); err != nil {
		return nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("kubetest: create service account %s/%s: %w", namespace, name, err)
	}
	expiry := int64((24 * time.Hour).Seconds())
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubetest: request token for %s/%s: %w", namespace, name, err)
	}
	return &rest.Config{
		Host:            cp.Config.Host,
		BearerToken:     tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.pki.caCertPEM},
		QPS:             50,
		Burst:           100,
	}, nil
}

// Grant binds rules to the service account namespace/name: a Role and RoleBinding in the
// namespace, or, with clusterWide, a ClusterRole and ClusterRoleBinding.
func (cp *ControlPlane) Grant(ctx context.Context, namespace, name string, clusterWide bool, rules ...rbacv1.PolicyRule) error {
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	roleName := "kubetest:" + namespace + ":" + name
	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}
	if clusterWide {
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: roleName}, Rules: rules,
		}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("kubetest: create cluster role %s: %w", roleName, err)
		}
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: roleName},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
			Subjects:   []rbacv1.Subject{subject},
		}, metav1.CreateOptions{})
		return err
	}
	if _, err := cs.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: roleName}, Rules: rules,
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kubetest: create role %s/%s: %w", namespace, roleName, err)
	}
	_, err = cs.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: roleName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: roleName},
		Subjects:   []rbacv1.Subject{subject},
	}, metav1.CreateOptions{})
	return err
}

// EnsureNamespace creates namespace, and its default service account, if they do not
// exist. kube-controller-manager creates the default service account too, but after an API
// server restart its watches may lag for tens of seconds, and pods cannot be created
// without it.
func EnsureNamespace(ctx context.Context, cs kubernetes.Interface, namespace string) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubetest: create namespace %s: %w", namespace, err)
	}
	_, err = cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubetest: create service account %s/default: %w", namespace, err)
	}
	return nil
}
