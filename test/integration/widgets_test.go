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
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/test/envtestutil"
)

// widgetsToGraduate installs widgets.<group> (v1 stores, v2 served) with n
// objects at v1 and a managed-mode policy asking for v2 (settle delay 1 s),
// all deleted when the spec ends.
func widgetsToGraduate(ctx context.Context, group string, n int) *apiextensionsv1.CustomResourceDefinition {
	GinkgoHelper()
	dyn := env.Dynamic
	crd := envtestutil.WidgetCRD(group, "v1", "v2")
	Expect(k8sClient.Create(ctx, crd)).To(Succeed())
	DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, crd))).To(Succeed()) })
	Eventually(func(ctx context.Context) error { return envtestutil.Served(ctx, dyn, crd) }).WithContext(ctx).Should(Succeed())
	v1 := envtestutil.WidgetResource(group, "v1")
	Expect(envtestutil.CreateObjects(ctx, dyn, v1, n, 4, func(i int) *unstructured.Unstructured {
		return envtestutil.Widget(v1, "default", fmt.Sprintf("w%02d", i), map[string]any{"color": "blue", "size": int64(i)})
	})).To(Succeed())
	policy := &graduatorv1alpha1.CRDVersionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: crd.Name},
		Spec: graduatorv1alpha1.CRDVersionPolicySpec{
			StorageVersion: "v2",
			Migration:      graduatorv1alpha1.MigrationSettings{SettleDelay: &metav1.Duration{Duration: time.Second}},
		},
	}
	Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, policy))).To(Succeed()) })
	return crd
}
