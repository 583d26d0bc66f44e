/*
Copyright 2026 The Graduator Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package main

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graduator/graduator/test/chart"
)

// The polite section's identities: who the engine and the other clients
// are to the API server, and so what API Priority and Fairness does with
// their requests.
const (
	// identityAdmin: everyone is envtest's admin (system:masters), which
	// APF exempts: the engine's own limit is all there is.
	identityAdmin = "admin"
	// identityCluster: as a cluster with the chart installed runs it. The
	// engine is the chart's ServiceAccount, which the chart's FlowSchema
	// puts on the chart's PriorityLevelConfiguration; the other clients
	// are an ordinary user (global-default, not exempt).
	identityCluster = "serviceaccount"
)

var allIdentities = []string{identityAdmin, identityCluster}

// identity is the clients of one identity.
type identity struct {
	name string
	// engine is the engine's config and client, foreground the other
	// clients'.
	engine        *rest.Config
	engineDyn     dynamic.Interface
	foregroundDyn dynamic.Interface
}

// apfRelease and apfNamespace are where the chart is rendered: the
// ServiceAccount its FlowSchema matches lives there.
const apfRelease, apfNamespace = "graduator", "graduator-system"

// identities returns the identities the polite section runs in.
func (b *bench) identities(ctx context.Context) ([]identity, error) {
	var ids []identity
	for _, name := range b.opts.identities {
		switch name {
		case identityAdmin:
			ids = append(ids, identity{name: name, engine: b.cfg, engineDyn: b.dyn, foregroundDyn: b.dyn})
		case identityCluster:
			id, err := b.clusterIdentity(ctx)
			if err != nil {
				return nil, fmt.Errorf("identity %s: %w", name, err)
			}
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// clusterIdentity installs the chart's ServiceAccount, FlowSchema and
// PriorityLevelConfiguration (rendered by helm from charts/graduator), and
// returns the ServiceAccount's clients for the engine and an ordinary
// user's for the others. Both are bound to cluster-admin: RBAC decides
// what a request may do, not which priority level it waits in.
func (b *bench) clusterIdentity(ctx context.Context) (identity, error) {
	objs, err := chart.Template(apfRelease, apfNamespace)
	if err != nil {
		return identity{}, err
	}
	fs, pl, sa := firstOf(objs, "FlowSchema"), firstOf(objs, "PriorityLevelConfiguration"), firstOf(objs, "ServiceAccount")
	if fs == nil || pl == nil || sa == nil {
		return identity{}, fmt.Errorf("the chart rendered no FlowSchema, PriorityLevelConfiguration or ServiceAccount (apf.enabled?)")
	}
	clientset, err := kubernetes.NewForConfig(b.cfg)
	if err != nil {
		return identity{}, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: apfNamespace}}
	if _, err := clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return identity{}, err
	}
	for _, o := range []struct {
		obj *unstructured.Unstructured
		gvr schema.GroupVersionResource
	}{
		{pl, schema.GroupVersionResource{Group: "flowcontrol.apiserver.k8s.io", Version: "v1", Resource: "prioritylevelconfigurations"}},
		{fs, schema.GroupVersionResource{Group: "flowcontrol.apiserver.k8s.io", Version: "v1", Resource: "flowschemas"}},
		{sa, schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}},
	} {
		r := b.dyn.Resource(o.gvr)
		var err error
		if o.obj.GetNamespace() != "" || o.gvr.Resource == "serviceaccounts" {
			_, err = r.Namespace(apfNamespace).Create(ctx, o.obj, metav1.CreateOptions{})
		} else {
			_, err = r.Create(ctx, o.obj, metav1.CreateOptions{})
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return identity{}, fmt.Errorf("create %s %s: %w", o.obj.GetKind(), o.obj.GetName(), err)
		}
	}
	engine, err := b.serviceAccountConfig(ctx, clientset, sa.GetName())
	if err != nil {
		return identity{}, err
	}
	user, err := b.env.Environment.AddUser(envtest.User{Name: "bench-foreground", Groups: []string{"bench:foreground"}}, nil)
	if err != nil {
		return identity{}, err
	}
	foreground := rest.CopyConfig(user.Config())
	foreground.QPS, foreground.Burst = b.cfg.QPS, b.cfg.Burst
	if err := clusterAdmin(ctx, clientset, "bench-foreground", rbacv1.Subject{Kind: rbacv1.UserKind, Name: "bench-foreground"}); err != nil {
		return identity{}, err
	}
	id := identity{name: identityCluster, engine: engine}
	if id.engineDyn, err = dynamic.NewForConfig(engine); err != nil {
		return identity{}, err
	}
	if id.foregroundDyn, err = dynamic.NewForConfig(foreground); err != nil {
		return identity{}, err
	}
	return id, nil
}

// serviceAccountConfig binds the ServiceAccount to cluster-admin and
// returns a config that authenticates as it, with a token good for a day.
func (b *bench) serviceAccountConfig(ctx context.Context, clientset kubernetes.Interface, name string) (*rest.Config, error) {
	if err := clusterAdmin(ctx, clientset, "bench-"+name, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: apfNamespace}); err != nil {
		return nil, err
	}
	tr, err := clientset.CoreV1().ServiceAccounts(apfNamespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](86400)}},
		metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("a token for ServiceAccount %s/%s: %w", apfNamespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(b.cfg)
	cfg.BearerToken = tr.Status.Token
	cfg.QPS, cfg.Burst = b.cfg.QPS, b.cfg.Burst
	return cfg, nil
}

// firstOf is the first object of kind among objs, or nil.
func firstOf(objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind {
			return o
		}
	}
	return nil
}

// clusterAdmin binds subject to the cluster-admin ClusterRole.
func clusterAdmin(ctx context.Context, clientset kubernetes.Interface, name string, subject rbacv1.Subject) error {
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{subject},
	}
	if _, err := clientset.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bind %s to cluster-admin: %w", name, err)
	}
	return nil
}
