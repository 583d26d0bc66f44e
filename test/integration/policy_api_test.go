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

package integration

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
)

var _ = Describe("The CRDVersionPolicy API", func() {
	const crdName = "pizzas.restaurant.example.com"

	newPolicy := func(name string) *graduatorv1alpha1.CRDVersionPolicy {
		return &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: graduatorv1alpha1.CRDVersionPolicySpec{
				StorageVersion: "v1beta1",
				Deprecate: []graduatorv1alpha1.DeprecatedVersion{{
					Version: "v1alpha1",
					Warning: "restaurant.example.com/v1alpha1 Pizza is deprecated; use v1beta1",
				}},
				Unserve: []graduatorv1alpha1.UnservedVersion{{
					Version: "v1alpha1",
					After:   &metav1.Duration{Duration: 168 * time.Hour},
				}},
			},
		}
	}

	// expectRejected creates the policy and asserts the API server refuses it
	// as invalid, naming the offending field and saying what is wrong.
	expectRejected := func(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy, field, message string) {
		err := k8sClient.Create(ctx, policy)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "expected an Invalid error, got %v", err)
		Expect(err.Error()).To(ContainSubstring(field))
		Expect(err.Error()).To(ContainSubstring(message))

		// Nothing was stored.
		err = k8sClient.Get(ctx, client.ObjectKeyFromObject(policy), &graduatorv1alpha1.CRDVersionPolicy{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the rejected policy must not exist, got %v", err)
	}

	AfterEach(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: crdName},
		}))).To(Succeed())
	})

	It("accepts a valid policy and fills in the migration defaults", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, newPolicy(crdName))).To(Succeed())

		var got graduatorv1alpha1.CRDVersionPolicy
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: crdName}, &got)).To(Succeed())
		Expect(got.Spec.StorageVersion).To(Equal("v1beta1"))
		Expect(got.Spec.Unserve).To(ConsistOf(graduatorv1alpha1.UnservedVersion{
			Version: "v1alpha1", After: &metav1.Duration{Duration: 168 * time.Hour},
		}))
		Expect(got.Spec.Migration.Concurrency).To(BeZero(), "no fixed concurrency: the engine adapts up to 64")
		Expect(got.Spec.Migration.PageSize).To(BeEquivalentTo(500))
		Expect(got.Spec.Migration.QPS).To(BeZero(), "no QPS cap by default")
		Expect(got.Spec.Migration.WriteTo).To(Equal(graduatorv1alpha1.WriteToObject))
		Expect(got.Spec.Migration.SettleDelay).To(Equal(&metav1.Duration{Duration: 10 * time.Second}))
		Expect(got.Spec.CleanupManagedFields).To(Equal(ptr.To(true)))
	})

	It("accepts a GitOps-mode policy without a storage version", func(ctx SpecContext) {
		policy := newPolicy(crdName)
		policy.Spec.StorageVersion = ""
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	})

	It("rejects a name that is not a CRD name", func(ctx SpecContext) {
		expectRejected(ctx, newPolicy("pizzas"), "metadata.name",
			"must be the name of the CRD the policy governs")
	})

	It("rejects a storage version that is not a version name", func(ctx SpecContext) {
		policy := newPolicy(crdName)
		policy.Spec.StorageVersion = "V1_beta"
		expectRejected(ctx, policy, "spec.storageVersion", "storageVersion must be a version name")
	})

	It("rejects a version to unserve that is not a version name", func(ctx SpecContext) {
		policy := newPolicy(crdName)
		policy.Spec.Unserve[0].Version = "1alpha"
		expectRejected(ctx, policy, "spec.unserve[0].version", "version must be a version name")
	})

	It("rejects a storage version that is also listed to unserve", func(ctx SpecContext) {
		policy := newPolicy(crdName)
		policy.Spec.Unserve = append(policy.Spec.Unserve, graduatorv1alpha1.UnservedVersion{Version: "v1beta1"})
		expectRejected(ctx, policy, "spec", "storageVersion cannot also be listed in unserve")
	})

	It("rejects a negative concurrency", func(ctx SpecContext) {
		policy := newPolicy(crdName)
		policy.Spec.Migration.Concurrency = -4
		expectRejected(ctx, policy, "spec.migration.concurrency", "should be greater than or equal to 1")
	})

	It("rejects a page size beyond the upper bound", func(ctx SpecContext) {
		policy := newPolicy(crdName)
		policy.Spec.Migration.PageSize = 1_000_000
		expectRejected(ctx, policy, "spec.migration.pageSize", "should be less than or equal to 10000")
	})

	It("rejects a grace period that is not a duration", func(ctx SpecContext) {
		// A metav1.Duration cannot hold "one week", so send the raw object the
		// way kubectl would.
		policy := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "graduator.io/v1alpha1",
			"kind":       "CRDVersionPolicy",
			"metadata":   map[string]any{"name": crdName},
			"spec": map[string]any{
				"unserve": []any{map[string]any{"version": "v1alpha1", "after": "one week"}},
			},
		}}
		err := k8sClient.Create(ctx, policy)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "expected an Invalid error, got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.unserve[0].after"))
		Expect(err.Error()).To(ContainSubstring("after must be a duration"))
	})

	It("rejects a write target other than Object or Status", func(ctx SpecContext) {
		policy := newPolicy(crdName)
		policy.Spec.Migration.WriteTo = "Scale"
		expectRejected(ctx, policy, "spec.migration.writeTo", "Unsupported value")
	})
	It("accepts a selector policy of any name in GitOps mode", func(ctx SpecContext) {
		policy := &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "gateway-api"},
			Spec: graduatorv1alpha1.CRDVersionPolicySpec{
				Selector: &graduatorv1alpha1.CRDSelector{Groups: []string{"gateway.networking.k8s.io", "*.crossplane.io"}},
			},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Expect(k8sClient.Delete(ctx, policy)).To(Succeed())
	})

	It("rejects a selector policy that sets a storage version, deprecates or unserves", func(ctx SpecContext) {
		policy := newPolicy("gateway-api")
		policy.Spec.Selector = &graduatorv1alpha1.CRDSelector{Groups: []string{"gateway.networking.k8s.io"}}
		expectRejected(ctx, policy, "spec", "a policy with a selector follows each CRD's own storage version")
	})

	It("rejects an empty selector, which would select every CRD", func(ctx SpecContext) {
		policy := &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "everything"},
			Spec:       graduatorv1alpha1.CRDVersionPolicySpec{Selector: &graduatorv1alpha1.CRDSelector{}},
		}
		expectRejected(ctx, policy, "spec.selector", "an empty selector would select every CRD")
	})

	It("rejects a selector group that is not a DNS name", func(ctx SpecContext) {
		policy := &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "bad-group"},
			Spec:       graduatorv1alpha1.CRDVersionPolicySpec{Selector: &graduatorv1alpha1.CRDSelector{Groups: []string{"*"}}},
		}
		expectRejected(ctx, policy, "spec.selector.groups[0]", "a group is a DNS name")
	})
})
