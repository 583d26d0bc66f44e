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
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graduator/graduator/internal/storagemigration"
	"github.com/graduator/graduator/test/envtestutil"
)

var _ = Describe("The in-tree StorageVersionMigration on Kubernetes 1.37", func() {
	It("rewrites every object in the new storage version and prunes storedVersions, marking the CRD StorageMigrating meanwhile",
		func(ctx SpecContext) {
			const group, objects = "intree.test.graduator.io", 200
			crd := envtestutil.WidgetCRD(group, "v1", "v2")
			Expect(k8sClient.Create(ctx, crd)).To(Succeed())
			DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, crd))).To(Succeed()) })
			Eventually(func(ctx context.Context) error { return envtestutil.Served(ctx, dyn, crd) }).WithContext(ctx).Should(Succeed())
			v1 := envtestutil.WidgetResource(group, "v1")
			Expect(envtestutil.CreateObjects(ctx, dyn, v1, objects, 8, func(i int) *unstructured.Unstructured {
				return envtestutil.Widget(v1, "default", fmt.Sprintf("w%03d", i), map[string]any{"color": "blue", "size": int64(i)})
			})).To(Succeed())
			Expect(envtestutil.SetStorageVersion(ctx, k8sClient, crd.Name, "v2")).To(Succeed())
			Eventually(func(g Gomega) {
				var now apiextensionsv1.CustomResourceDefinition
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(crd), &now)).To(Succeed())
				g.Expect(now.Status.StoredVersions).To(ConsistOf("v1", "v2"))
			}).WithContext(ctx).Should(Succeed())
			Expect(etcd.Counts(ctx, group, "widgets")).To(Equal(map[string]int{group + "/v1": objects}))

			svm := &svmv1.StorageVersionMigration{
				ObjectMeta: metav1.ObjectMeta{Name: "widgets-by-hand"},
				Spec:       svmv1.StorageVersionMigrationSpec{Resource: storagemigration.ResourceOf(crd)},
			}
			started := time.Now()
			Expect(k8sClient.Create(ctx, svm)).To(Succeed())
			DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, svm))).To(Succeed()) })
			Eventually(func(g Gomega) storagemigration.Phase {
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(svm), svm)).To(Succeed())
				return storagemigration.PhaseOf(svm)
			}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(200*time.Millisecond).Should(Equal(storagemigration.Succeeded),
				"the in-tree migrator ran (kube-controller-manager with the garbage collector and the migrator)")
			GinkgoWriter.Printf("in-tree migration of %d objects: %s\n", objects, time.Since(started))

			Expect(etcd.Counts(ctx, group, "widgets")).To(Equal(map[string]int{group + "/v2": objects}),
				"etcd holds every object as v2")
			var now apiextensionsv1.CustomResourceDefinition
			Eventually(func(g Gomega) []string {
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(crd), &now)).To(Succeed())
				return now.Status.StoredVersions
			}).WithContext(ctx).Should(Equal([]string{"v2"}), "the in-tree migrator pruned storedVersions")
			Expect(storagemigration.CRDMigrating(&now)).To(BeFalse(), "StorageMigrating is no longer True")
		})
})
