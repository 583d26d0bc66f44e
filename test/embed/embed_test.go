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

package embed_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/graduator/graduator/crdmigrate"
	"github.com/graduator/graduator/internal/driver"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/migration"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/pizzaenv"
)

var _ = Describe("crdmigrate in a bare manager", func() {
	It("rewrites every object in etcd, prunes storedVersions and tells it in Events on the CRD", func(ctx SpecContext) {
		const group, objects = "embed.test.graduator.io", 300
		crd := envtestutil.WidgetCRD(group, "v1", "v2")
		r := rehearsal.WithT(GinkgoT())
		r.Install(ctx, crd)
		DeferCleanup(deleteCRD, crd.Name)
		Expect(envtestutil.CreateObjects(ctx, env.Dynamic, envtestutil.WidgetResource(group, "v1"), objects, 4, func(i int) *unstructured.Unstructured {
			return envtestutil.Widget(envtestutil.WidgetResource(group, "v1"), "default", fmt.Sprintf("w-%04d", i), map[string]any{"color": "red", "size": int64(i)})
		})).To(Succeed())
		Expect(r.Stored(ctx, crd.Name).Count(group + "/v1")).To(Equal(objects))
		snap := r.Snapshot(ctx, crd.Name)

		startManager(crdmigrate.Options{CRDs: []string{crd.Name}, SettleDelay: time.Second, PageSize: 50})
		By("a release that stores v2")
		Expect(envtestutil.SetStorageVersion(ctx, env.Client, crd.Name, "v2")).To(Succeed())

		Eventually(storedVersions(ctx, crd.Name)).WithTimeout(2 * time.Minute).Should(Equal([]string{"v2"}))
		stored := r.Stored(ctx, crd.Name)
		Expect(stored.NotAs(group+"/v2")).To(BeEmpty(), stored.String())
		Expect(stored.Objects).To(HaveLen(objects))
		r.Verify(ctx, snap)
		Eventually(crdEvents(ctx, crd.Name)).Should(ContainElements(
			And(HaveField("Reason", driver.ReasonMigrationStarted), HaveField("Type", "Normal")),
			And(HaveField("Reason", driver.ReasonMigrationCompleted), HaveField("Note", ContainSubstring("rewritten as v2"))),
			And(HaveField("Reason", driver.ReasonStoredVersionsPruned), HaveField("Note", ContainSubstring("from [v1, v2] to [v2]"))),
		))
		Expect(counter("graduator_objects_rewritten_total", crd.Name)).To(BeNumerically(">=", objects),
			"the manager's registry counts the rewrites")
	})

	It("prunes nothing while the conversion webhook is down, and finishes when it is back", func(ctx SpecContext) {
		const objects = 600
		webhook, err := pizzaenv.StartWebhook(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(webhook.Stop)
		stage, err := pizzaenv.Stage(2) // v1alpha1 stored, v1beta1 served through the webhook
		Expect(err).NotTo(HaveOccurred())
		webhook.PointConversionAt(stage)
		r := rehearsal.WithT(GinkgoT())
		r.Install(ctx, stage)
		DeferCleanup(deleteCRD, pizzaenv.CRDName)
		for i := range objects {
			r.Create(ctx, pizzaenv.SampleV1alpha1(i))
		}
		snap := r.Snapshot(ctx, pizzaenv.CRDName)

		startManager(crdmigrate.Options{
			CRDs: []string{pizzaenv.CRDName}, SettleDelay: time.Second,
			Concurrency: 2, PageSize: 50, QPS: 60, Priority: migration.PriorityBackground,
		})
		By("a release that stores v1beta1")
		Expect(envtestutil.SetStorageVersion(ctx, env.Client, pizzaenv.CRDName, "v1beta1")).To(Succeed())
		Eventually(func() int { return r.Stored(ctx, pizzaenv.CRDName).Count("restaurant.example.com/v1beta1") }).
			WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(BeNumerically(">=", 100))

		By("stopping the webhook mid-run")
		webhook.Stop()
		// Restarted before the CRD is deleted (cleanups run last in, first
		// out) when the spec fails before it restarts it: deleting the
		// objects stored as v1alpha1 needs a conversion.
		DeferCleanup(func(ctx SpecContext) { Expect(webhook.Start(ctx)).To(Succeed()) })
		Eventually(crdEvents(ctx, pizzaenv.CRDName)).WithTimeout(30 * time.Second).Should(ContainElement(And(
			HaveField("Reason", graduation.ReasonConversionFailed), HaveField("Type", "Warning"),
			HaveField("Note", And(ContainSubstring("conversion webhook"), ContainSubstring("retrying in"))))))
		Consistently(storedVersions(ctx, pizzaenv.CRDName)).WithTimeout(8*time.Second).
			Should(ContainElement("v1alpha1"), "nothing is pruned while objects are stored as v1alpha1")
		stalled := r.Stored(ctx, pizzaenv.CRDName)
		Expect(stalled.Count("restaurant.example.com/v1alpha1")).To(BeNumerically(">", 0), stalled.String())
		GinkgoWriter.Println("while the webhook is down:", stalled.String())

		By("starting the webhook again")
		Expect(webhook.Start(ctx)).To(Succeed())
		Eventually(storedVersions(ctx, pizzaenv.CRDName)).WithTimeout(3 * time.Minute).Should(Equal([]string{"v1beta1"}))
		after := r.Stored(ctx, pizzaenv.CRDName)
		Expect(after.NotAs("restaurant.example.com/v1beta1")).To(BeEmpty(), after.String())
		Expect(after.Objects).To(HaveLen(objects))
		r.Verify(ctx, snap)
	})
})

// counter reads a counter of the manager's registry for a CRD.
func counter(name, crd string) float64 {
	GinkgoHelper()
	families, err := crmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabel(m, "crd", crd) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
