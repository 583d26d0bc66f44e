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

package intree_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/internal/storagemigration"
)

var _ = Describe("Engine StorageVersionMigration on a server before Kubernetes 1.37", Label(olderServer), func() {
	// refused waits until Ready says the engine cannot run here and checks
	// that nothing was written: every object still stored at v1, and the
	// CRD's storedVersions as they were.
	refused := func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, storedVersions []string) {
		GinkgoHelper()
		Eventually(readyOf(ctx, crd.Name)).WithContext(ctx).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).
			Should(And(haveStatusReason(metav1.ConditionFalse, graduation.ReasonInTreeMigrationUnavailable),
				HaveField("Message", ContainSubstring("needs Kubernetes "+storagemigration.MinRelease+" or newer"))))
		GinkgoWriter.Printf("Ready: %s\n", readyOf(ctx, crd.Name)().Message)
		Consistently(func(g Gomega) {
			counts, err := etcd.Counts(ctx, crd.Spec.Group, "widgets")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(counts).To(Equal(map[string]int{crd.Spec.Group + "/v1": 20}), "no object was rewritten")
			g.Expect(getCRD(ctx, crd.Name).Status.StoredVersions).To(Equal(storedVersions))
			g.Expect(readyOf(ctx, crd.Name)()).To(haveStatusReason(metav1.ConditionFalse, graduation.ReasonInTreeMigrationUnavailable))
		}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	}

	It("is refused before anything is switched: Ready=False InTreeMigrationUnavailable names the release it needs", func(ctx SpecContext) {
		crd := installWidgets(ctx, "older.test.graduator.io", 20)
		startOperator()
		createPolicy(ctx, inTreePolicy(crd.Name, "v2"))
		refused(ctx, crd, []string{"v1"})
		Expect(readyOf(ctx, crd.Name)().Message).To(ContainSubstring("(Kubernetes v1."), "the message names the server's release")
		now := getCRD(ctx, crd.Name)
		Expect(apihelpers.GetCRDStorageVersion(now)).To(Equal("v1"), "the storage version was not switched")
		Expect(meta.FindStatusCondition(getPolicy(ctx, crd.Name).Status.Conditions, graduatorv1alpha1.ConditionPreflightPassed)).
			To(Or(BeNil(), Not(HaveField("Status", metav1.ConditionTrue))), "no preflight ran")
	})

	It("is refused in GitOps mode too, once the manifest switched the storage version: nothing is rewritten or pruned",
		func(ctx SpecContext) {
			crd := installWidgets(ctx, "older-gitops.test.graduator.io", 20)
			Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
				now := getCRD(ctx, crd.Name)
				now.Spec.Versions[0].Storage, now.Spec.Versions[1].Storage = false, true
				return k8sClient.Update(ctx, now)
			})).To(Succeed())
			startOperator()
			createPolicy(ctx, inTreePolicy(crd.Name, ""))
			refused(ctx, crd, []string{"v1", "v2"})
		})
})
