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

package graduation_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/test/envtestutil"
)

// widgetCRD is a small namespaced CRD whose versions share one schema, so it
// needs no conversion webhook: the specs that are not about conversion use
// it. The first version is the storage version.
func widgetCRD(group string, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	return envtestutil.WidgetCRD(group, versions...)
}

// installCRD creates the CRD, waits until it is served, and deletes it (and
// its objects) when the spec ends.
func installCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) {
	Expect(k8sClient.Create(ctx, crd)).To(Succeed())
	DeferCleanup(deleteCRD, crd.Name)
	Expect(envtestutil.WaitServed(ctx, k8sClient, dyn, crd.Name)).To(Succeed())
}

// createWidgets creates n widgets at the given version in namespace default,
// one after the other.
func createWidgets(ctx context.Context, gvr schema.GroupVersionResource, n int) {
	ExpectWithOffset(1, envtestutil.CreateObjects(ctx, dyn, gvr, n, 1, func(i int) *unstructured.Unstructured {
		return envtestutil.Widget(gvr, "default", fmt.Sprintf("widget-%04d", i), map[string]any{"color": "blue", "size": int64(i)})
	})).To(Succeed())
}

// createPolicy creates the policy and deletes it when the spec ends.
func createPolicy(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy) {
	Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, policy))).To(Succeed())
	})
}

// policyCondition returns a condition of the policy, for Eventually.
func policyCondition(ctx context.Context, name, condType string) func() *metav1.Condition {
	return func() *metav1.Condition {
		var p graduatorv1alpha1.CRDVersionPolicy
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, &p); err != nil {
			return nil
		}
		return meta.FindStatusCondition(p.Status.Conditions, condType)
	}
}

// haveStatusReason matches a condition with the status and reason.
func haveStatusReason(status metav1.ConditionStatus, reason string) OmegaMatcher {
	return And(Not(BeNil()), HaveField("Status", status), HaveField("Reason", reason))
}

func getCRD(ctx context.Context, name string) *apiextensionsv1.CustomResourceDefinition {
	var crd apiextensionsv1.CustomResourceDefinition
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKey{Name: name}, &crd)).To(Succeed())
	return &crd
}

func getPolicy(ctx context.Context, name string) *graduatorv1alpha1.CRDVersionPolicy {
	var p graduatorv1alpha1.CRDVersionPolicy
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKey{Name: name}, &p)).To(Succeed())
	return &p
}

// deleteCRD deletes a CRD, and so its objects, and waits until it is gone.
func deleteCRD(ctx context.Context, name string) {
	Expect(envtestutil.DeleteCRD(ctx, k8sClient, name, time.Minute)).To(Succeed())
}
