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
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/internal/metrics"
	"github.com/graduator/graduator/test/envtestutil"
)

var _ = Describe("A fleet policy selecting CRDs by group", func() {
	const (
		groupA  = "a.fleet.test.graduator.io"
		groupB  = "b.fleet.test.graduator.io"
		objects = 40
	)

	// kindCRD is a widget-like CRD with its own plural in a group, storing v1.
	kindCRD := func(group string, i int) *apiextensionsv1.CustomResourceDefinition {
		crd := widgetCRD(group, "v1", "v2")
		kind := fmt.Sprintf("Gadget%d", i)
		crd.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{
			Plural: fmt.Sprintf("gadget%ds", i), Singular: fmt.Sprintf("gadget%d", i), Kind: kind, ListKind: kind + "List",
		}
		crd.Name = crd.Spec.Names.Plural + "." + group
		return crd
	}
	install := func(ctx SpecContext, crd *apiextensionsv1.CustomResourceDefinition) {
		installCRD(ctx, crd)
		gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: "v1", Resource: crd.Spec.Names.Plural}
		Expect(envtestutil.CreateObjects(ctx, dyn, gvr, objects, 4, func(i int) *unstructured.Unstructured {
			obj := envtestutil.Widget(gvr, "default", fmt.Sprintf("g-%03d", i), map[string]any{"color": "blue"})
			obj.SetKind(crd.Spec.Names.Kind)
			return obj
		})).To(Succeed())
	}
	// flip does what a release of the CRD manifest does: store v2.
	flip := func(ctx SpecContext, name string) {
		live := getCRD(ctx, name)
		for i := range live.Spec.Versions {
			live.Spec.Versions[i].Storage = live.Spec.Versions[i].Name == "v2"
		}
		Expect(k8sClient.Update(ctx, live)).To(Succeed())
	}
	storedOnlyV2 := func(ctx SpecContext, crd *apiextensionsv1.CustomResourceDefinition) {
		Eventually(func() []string { return getCRD(ctx, crd.Name).Status.StoredVersions }).WithTimeout(3*time.Minute).
			Should(Equal([]string{"v2"}), crd.Name)
		Expect(storedAPIVersions(ctx, crd.Spec.Group, crd.Spec.Names.Plural)).To(And(HaveLen(objects), HaveEach(crd.Spec.Group+"/v2")), crd.Name)
	}

	It("graduates every CRD of its group and nothing else, yields to a per-CRD policy, picks up a new CRD, and runs at most the manager's limit at once", func(ctx SpecContext) {
		var inA, inB []*apiextensionsv1.CustomResourceDefinition
		for i := range 6 {
			inA = append(inA, kindCRD(groupA, i))
			install(ctx, inA[i])
		}
		for i := range 4 {
			inB = append(inB, kindCRD(groupB, i))
			install(ctx, inB[i])
		}

		By("measuring how many migrations run at once")
		var peak atomic.Int32
		measureCtx, stopMeasuring := context.WithCancel(ctx)
		DeferCleanup(stopMeasuring)
		go func() {
			for measureCtx.Err() == nil {
				if n := int32(metrics.Running()); n > peak.Load() {
					peak.Store(n)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
		op := startOperatorWith(operatorOptions{}) // --max-concurrent-graduations 2
		DeferCleanup(op.stop)

		By("a per-CRD policy of the user's own on one CRD of a, and a selector policy for a")
		own := &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: inA[0].Name},
			Spec: graduatorv1alpha1.CRDVersionPolicySpec{Migration: graduatorv1alpha1.MigrationSettings{
				PageSize: 7, SettleDelay: &metav1.Duration{Duration: time.Second},
			}},
		}
		createPolicy(ctx, own)
		fleet := &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "fleet-a"},
			Spec: graduatorv1alpha1.CRDVersionPolicySpec{
				Selector:  &graduatorv1alpha1.CRDSelector{Groups: []string{groupA}},
				Migration: graduatorv1alpha1.MigrationSettings{PageSize: 10, SettleDelay: &metav1.Duration{Duration: time.Second}},
			},
		}
		createPolicy(ctx, fleet)
		DeferCleanup(func(ctx context.Context) { // no garbage collector in envtest
			for _, crd := range inA {
				_ = k8sClient.Delete(ctx, &graduatorv1alpha1.CRDVersionPolicy{ObjectMeta: metav1.ObjectMeta{Name: crd.Name}})
			}
		})

		By("every manifest flipping storage to v2")
		for _, crd := range append(append([]*apiextensionsv1.CustomResourceDefinition{}, inA...), inB...) {
			flip(ctx, crd.Name)
		}
		for _, crd := range inA {
			storedOnlyV2(ctx, crd)
		}
		for _, crd := range inB {
			Expect(getCRD(ctx, crd.Name).Status.StoredVersions).To(ConsistOf("v1", "v2"), "%s is not selected", crd.Name)
			Expect(storedAPIVersions(ctx, groupB, crd.Spec.Names.Plural)).To(And(HaveLen(objects), HaveEach(groupB+"/v1")),
				"%s is untouched", crd.Name)
		}

		By("the user's policy keeping its CRD")
		mine := getPolicy(ctx, own.Name)
		Expect(mine.Labels).NotTo(HaveKey(graduatorv1alpha1.FleetLabel))
		Expect(mine.Spec.Migration.PageSize).To(BeEquivalentTo(7), "its settings are used")
		Expect(op.requests.lists(inA[0].Spec.Names.Plural)).NotTo(BeEmpty())
		Eventually(func() *graduatorv1alpha1.FleetStatus { return getPolicy(ctx, fleet.Name).Status.Fleet }).WithTimeout(time.Minute).
			Should(And(HaveField("Selected", BeEquivalentTo(6)),
				HaveField("GovernedElsewhere", ContainElement(HaveField("CRD", inA[0].Name)))))
		Eventually(policyCondition(ctx, fleet.Name, graduatorv1alpha1.ConditionReady)).WithTimeout(time.Minute).
			Should(haveStatusReason(metav1.ConditionTrue, graduation.ReasonGraduated))

		By("a CRD created later in a")
		later := kindCRD(groupA, 9)
		install(ctx, later)
		DeferCleanup(func(ctx context.Context) {
			_ = k8sClient.Delete(ctx, &graduatorv1alpha1.CRDVersionPolicy{ObjectMeta: metav1.ObjectMeta{Name: later.Name}})
		})
		flip(ctx, later.Name)
		storedOnlyV2(ctx, later)

		stopMeasuring()
		Expect(peak.Load()).To(BeNumerically(">=", 1), "migrations were seen running")
		Expect(peak.Load()).To(BeNumerically("<=", 2), "never more than --max-concurrent-graduations at once")
		GinkgoWriter.Printf("peak of migrations running at once: %d\n", peak.Load())
	})
})
