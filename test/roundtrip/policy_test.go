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

package roundtrip_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/roundtrip"
)

var _ = Describe("A policy's spec.migration.acceptLoss", func() {
	policy := func(accept ...string) *graduatorv1alpha1.CRDVersionPolicy {
		return &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "gadgets.accept.example.com"},
			Spec: graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v2",
				Migration: graduatorv1alpha1.MigrationSettings{AcceptLoss: accept}},
		}
	}
	AfterEach(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(env.Client.Delete(ctx, policy()))).To(Succeed())
	})

	It("takes field paths with list wildcards, and the proof defaults to every object", func(ctx SpecContext) {
		Expect(env.Client.Create(ctx, policy("/spec/rare", "/status/conditions/*/reason", "/metadata/annotations/example.com~1stash"))).To(Succeed())
		var got graduatorv1alpha1.CRDVersionPolicy
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: "gadgets.accept.example.com"}, &got)).To(Succeed())
		Expect(got.Spec.Migration.RoundTripProof).To(Equal(graduatorv1alpha1.RoundTripProofEvery))
		opts := roundtrip.OptionsFor(got.Spec.Migration, "v2")
		Expect(opts.AcceptLoss).To(HaveLen(3))
		Expect(opts.Sample).To(BeFalse())
	})

	DescribeTable("refuses what is not a field path, as ValidPath does",
		func(ctx SpecContext, path string) {
			Expect(roundtrip.ValidPath(path)).To(BeFalse())
			err := env.Client.Create(ctx, policy(path))
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "expected an Invalid error, got %v", err)
			Expect(err.Error()).To(ContainSubstring("spec.migration.acceptLoss"))
			Expect(err.Error()).To(ContainSubstring("a field path is a JSON pointer"))
		},
		Entry("no leading slash", "spec/rare"),
		Entry("an empty segment", "/spec//rare"),
		Entry("a trailing slash", "/spec/rare/"),
		Entry("a bad escape", "/metadata/annotations/a~2b"),
	)
})
