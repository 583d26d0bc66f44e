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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/driver"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/test/envtestutil"
)

var _ = Describe("Status never goes back in time", func() {
	It("refuses the status write of a reconcile that planned from a stale copy, and writes no object", func(ctx SpecContext) {
		const group = "stale.graduation.test.graduator.io"
		crd := widgetCRD(group, "v1", "v2")
		installCRD(ctx, crd)
		createWidgets(ctx, envtestutil.WidgetResource(group, "v1"), 60)
		op := startOperator()
		createPolicy(ctx, slowPolicy(crd.Name, "v2", 10))

		By("keeping a copy of the policy read while it migrates")
		var stale *graduatorv1alpha1.CRDVersionPolicy
		Eventually(func() bool {
			p := getPolicy(ctx, crd.Name)
			if run := p.Status.Migration; run != nil && run.CompletedAt == nil && run.Listed > 0 {
				stale = p
				return true
			}
			return false
		}).WithTimeout(time.Minute).WithPolling(20 * time.Millisecond).Should(BeTrue())
		Eventually(policyCondition(ctx, crd.Name, graduatorv1alpha1.ConditionReady)).WithTimeout(2 * time.Minute).
			Should(haveStatusReason(metav1.ConditionTrue, graduation.ReasonGraduated))
		op.stop()
		before := widgetVersions(ctx, group)

		By("driving one reconcile from the stale copy")
		d := testDriver()
		store := &driver.PolicyStore{Client: k8sClient, Reader: staleReader{Reader: k8sClient, stale: stale}, Name: crd.Name}
		policy, err := store.Load(ctx)
		Expect(err).NotTo(HaveOccurred())
		_, err = d.Run(ctx, store, policy)
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "the status write must be refused, got %v", err)

		now := getPolicy(ctx, crd.Name)
		Expect(now.Status.Phase).To(Equal(graduatorv1alpha1.PhaseGraduated), "the phase went back")
		Expect(meta.IsStatusConditionTrue(now.Status.Conditions, graduatorv1alpha1.ConditionReady)).To(BeTrue())
		Expect(widgetVersions(ctx, group)).To(Equal(before), "an object was written")
	})

	It("keeps a graduated policy Ready, with no write to any object after the prune", func(ctx SpecContext) {
		const (
			group = "steady.graduation.test.graduator.io"
			n     = 10000
		)
		crd := widgetCRD(group, "v1", "v2")
		Expect(k8sClient.Create(ctx, crd)).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			// Ten thousand objects take a while to go with their CRD.
			Expect(envtestutil.DeleteCRD(ctx, k8sClient, crd.Name, 10*time.Minute)).To(Succeed())
		}, NodeTimeout(11*time.Minute))
		Expect(envtestutil.WaitServed(ctx, k8sClient, dyn, crd.Name)).To(Succeed())
		v1 := envtestutil.WidgetResource(group, "v1")
		Expect(envtestutil.CreateObjects(ctx, dyn, v1, n, 16, func(i int) *unstructured.Unstructured {
			return envtestutil.Widget(v1, "default", fmt.Sprintf("w-%05d", i), map[string]any{"size": int64(i)})
		})).To(Succeed())
		Expect(envtestutil.SetStorageVersion(ctx, k8sClient, crd.Name, "v2")).To(Succeed())
		op := startOperator()
		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{ObjectMeta: metav1.ObjectMeta{Name: crd.Name}})

		Eventually(policyCondition(ctx, crd.Name, graduatorv1alpha1.ConditionReady)).WithTimeout(5 * time.Minute).
			Should(haveStatusReason(metav1.ConditionTrue, graduation.ReasonGraduated))
		ready := time.Now()
		Expect(getCRD(ctx, crd.Name).Status.StoredVersions).To(Equal([]string{"v2"}))

		By("watching the policy for a minute")
		Consistently(func(g Gomega) {
			p := getPolicy(ctx, crd.Name)
			g.Expect(p.Status.Phase).To(Equal(graduatorv1alpha1.PhaseGraduated))
			g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, graduatorv1alpha1.ConditionReady)).To(BeTrue())
		}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
		Expect(op.requests.writes("widgets", ready)).To(BeEmpty(), "objects written after the graduation")
	})
})

// testDriver is the operator's driver with the suite's admin clients.
func testDriver() *driver.Driver {
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	return &driver.Driver{
		Clients: driver.Clients{
			Client: k8sClient, Reader: k8sClient, Dynamic: dyn, Config: cfg, Discovery: disco,
			Reviews: cs.AuthorizationV1().SelfSubjectAccessReviews(),
		},
		Reporter: silent{},
	}
}

type silent struct{}

func (silent) Event(*graduatorv1alpha1.CRDVersionPolicy, *apiextensionsv1.CustomResourceDefinition, string, string, string, string) {
}
func (silent) Planned(*graduatorv1alpha1.CRDVersionPolicy, graduation.Step, graduatorv1alpha1.Phase) {
}

// staleReader answers reads of one policy with an old copy of it, as a
// lagging cache would.
type staleReader struct {
	client.Reader
	stale *graduatorv1alpha1.CRDVersionPolicy
}

func (r staleReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if p, ok := obj.(*graduatorv1alpha1.CRDVersionPolicy); ok && key.Name == r.stale.Name {
		r.stale.DeepCopyInto(p)
		return nil
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// widgetVersions is every widget's resourceVersion, by name.
func widgetVersions(ctx context.Context, group string) map[string]string {
	list, err := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v2", Resource: "widgets"}).Namespace("default").
		List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	out := map[string]string{}
	for _, o := range list.Items {
		out[o.GetName()] = o.GetResourceVersion()
	}
	return out
}
