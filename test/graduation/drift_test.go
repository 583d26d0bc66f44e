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
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var _ = Describe("A CRD without a policy", func() {
	It("has its stale stored version reported as a metric and an Event, and is not changed", func(ctx SpecContext) {
		op := startOperator()
		DeferCleanup(op.stop)
		const group = "drift.test.graduator.io"
		crd := widgetCRD(group, "v1", "v2")
		installCRD(ctx, crd)
		createWidgets(ctx, schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}, 5)
		Eventually(func() float64 { return staleGauge(crd.Name) }).WithTimeout(30 * time.Second).Should(BeZero())

		live := getCRD(ctx, crd.Name)
		live.Spec.Versions[0].Storage, live.Spec.Versions[1].Storage = false, true
		Expect(k8sClient.Update(ctx, live)).To(Succeed())

		Eventually(func() float64 { return staleGauge(crd.Name) }).WithTimeout(30*time.Second).Should(Equal(1.0),
			"graduator_crd_stale_stored_versions counts v1")
		Eventually(func(g Gomega) {
			var events eventsv1.EventList
			g.Expect(k8sClient.List(ctx, &events, client.InNamespace("default"))).To(Succeed())
			g.Expect(events.Items).To(ContainElement(And(
				HaveField("Regarding.Name", crd.Name),
				HaveField("Reason", "StaleStoredVersions"),
				HaveField("Note", ContainSubstring("status.storedVersions lists v1 but the storage version is v2")),
			)))
		}).WithTimeout(30 * time.Second).Should(Succeed())

		Consistently(func() []string { return getCRD(ctx, crd.Name).Status.StoredVersions }).WithTimeout(3*time.Second).
			Should(ConsistOf("v1", "v2"), "nothing is migrated or pruned without a policy")
		Expect(storedAPIVersions(ctx, group, "widgets")).To(HaveEach(group + "/v1"))
	})
})

// staleGauge reads graduator_crd_stale_stored_versions for a CRD from the
// controller-runtime registry the manager serves; -1 when absent.
func staleGauge(crd string) float64 {
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, family := range families {
		if family.GetName() != "graduator_crd_stale_stored_versions" {
			continue
		}
		for _, m := range family.GetMetric() {
			for _, label := range m.GetLabel() {
				if label.GetName() == "crd" && label.GetValue() == crd {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
