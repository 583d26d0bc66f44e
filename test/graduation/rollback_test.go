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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
)

var _ = Describe("A policy rolled back to an older storage version", func() {
	It("serves the older version again, switches storage to it, rewrites every object and prunes storedVersions to it", func(ctx SpecContext) {
		op := startOperator()
		DeferCleanup(op.stop)

		const group = "rollback.test.graduator.io"
		By("release N+1 graduated: v2 stores every object, v1 unserved")
		crd := widgetCRD(group, "v1", "v2")
		crd.Spec.Versions[0].Served, crd.Spec.Versions[0].Storage = false, false
		crd.Spec.Versions[1].Storage = true
		installCRD(ctx, crd)
		createWidgets(ctx, schema.GroupVersionResource{Group: group, Version: "v2", Resource: "widgets"}, 40)
		Expect(getCRD(ctx, crd.Name).Status.StoredVersions).To(Equal([]string{"v2"}))

		By("release N's policy, as a GitOps rollback leaves it: storageVersion v1")
		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: crd.Name},
			Spec: graduatorv1alpha1.CRDVersionPolicySpec{
				StorageVersion: "v1",
				Migration:      graduatorv1alpha1.MigrationSettings{SettleDelay: &metav1.Duration{Duration: time.Second}},
			},
		})
		Eventually(func() graduatorv1alpha1.Phase { return getPolicy(ctx, crd.Name).Status.Phase }).WithTimeout(2 * time.Minute).
			Should(Equal(graduatorv1alpha1.PhaseGraduated))
		live := getCRD(ctx, crd.Name)
		Expect(live.Spec.Versions[0].Name).To(Equal("v1"))
		Expect(live.Spec.Versions[0].Served).To(BeTrue(), "v1 is served again")
		Expect(live.Spec.Versions[0].Storage).To(BeTrue(), "v1 is the storage version")
		Expect(live.Status.StoredVersions).To(Equal([]string{"v1"}))
		Expect(storedAPIVersions(ctx, group, "widgets")).To(And(HaveLen(40), HaveEach(group+"/v1")), "etcd holds every widget as v1")
	})
})
