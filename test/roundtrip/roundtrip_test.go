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
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/graduator/graduator/internal/roundtrip"
)

// gadgetSpec is the i-th gadget's spec at v1: about 3% carry the optional
// spec.rare, one in five a list of parts.
func gadgetSpec(i int) map[string]any {
	spec := map[string]any{"color": "red", "size": int64(i)}
	if i%33 == 0 {
		spec["rare"] = "kept?"
	}
	if i%5 == 0 {
		spec["parts"] = []any{map[string]any{"name": "bolt", "count": int64(2)}, map[string]any{"name": "nut"}}
	}
	return spec
}

const rareCarriers = 31 // i%33 == 0 for i in [0, 1000)

// prove proves g through v2 and expects no object written.
func prove(ctx context.Context, g gadgets, opts roundtrip.Options) roundtrip.Result {
	GinkgoHelper()
	r, _ := timedProve(ctx, g, opts)
	return r
}

// timedProve is prove, and how long roundtrip.Prove took.
func timedProve(ctx context.Context, g gadgets, opts roundtrip.Options) (roundtrip.Result, time.Duration) {
	GinkgoHelper()
	opts.Target = "v2"
	before := g.resourceVersions(ctx)
	crd := g.fresh(ctx)
	start := time.Now()
	r, err := roundtrip.Prove(ctx, env.Dynamic, crd, opts)
	took := time.Since(start)
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("%s proof in %s: %s\n", r.Source, took, r.Message())
	Expect(g.resourceVersions(ctx)).To(Equal(before), "the proof wrote an object")
	return r, took
}

func lostPaths(r roundtrip.Result) []string {
	var paths []string
	for _, v := range r.Versions {
		for _, l := range v.Losses {
			paths = append(paths, l.Path)
		}
	}
	return paths
}

var _ = Describe("The round-trip proof", func() {
	It("finds a webhook that drops a field 3% of 1,000 objects carry, before and after the storage switch, and writes nothing", func(ctx SpecContext) {
		w := startWebhook(true)
		g := newGadgets(ctx, &w)
		g.create(ctx, 1000, gadgetSpec)

		By("asking the webhook before the switch, for every object")
		r := prove(ctx, g, roundtrip.Options{})
		Expect(r.Source).To(Equal(roundtrip.SourceWebhook))
		Expect(r.Every).To(BeTrue())
		Expect(r.Lossless()).To(BeFalse())
		Expect(r.Versions).To(HaveLen(1))
		v := r.Versions[0]
		Expect(v.Listed).To(Equal(1000))
		Expect(v.Sampled).To(Equal(1000))
		Expect(v.Losses).To(ConsistOf(And(HaveField("Path", "/spec/rare"), HaveField("Objects", rareCarriers),
			HaveField("Carriers", rareCarriers), HaveField("Examples", HaveLen(roundtrip.MaxExamples)))))
		Expect(r.Message()).To(HavePrefix("v1 -> v2 -> v1 loses /spec/rare on 31 of 1000 Gadgets ("))

		By("asking the webhook for a sample, the opt-out")
		r = prove(ctx, g, roundtrip.Options{Sample: true})
		v = r.Versions[0]
		// The value classes: the first 16 sizes (a path is enum-like until
		// it holds more values), the largest size, the first carrier of
		// each path.
		Expect(v.Sampled).To(Equal(17), "a sample, not every object")
		Expect(v.Losses).To(ConsistOf(And(
			HaveField("Path", "/spec/rare"), HaveField("Objects", 1), HaveField("Carriers", rareCarriers),
			HaveField("Examples", ConsistOf("default/gadget-00000"))))) // the first carrier listed
		Expect(r.Message()).To(HavePrefix("v1 -> v2 -> v1 loses /spec/rare on 1 of 17 sampled Gadgets"))

		By("after the switch: every object through the webhook, the class sample by the migration's write as a dry run")
		g.switchStorage(ctx)
		r = prove(ctx, g, roundtrip.Options{})
		Expect(r.Source).To(Equal(roundtrip.SourceWebhook))
		Expect(r.Versions[0].Sampled).To(Equal(1000))
		Expect(r.Versions[0].DryRun).To(Equal(17))
		Expect(lostPaths(r)).To(ConsistOf("/spec/rare"))

		By("a sample by dry run only, the opt-out after the switch")
		r = prove(ctx, g, roundtrip.Options{Sample: true})
		Expect(r.Source).To(Equal(roundtrip.SourceDryRun))
		Expect(lostPaths(r)).To(ConsistOf("/spec/rare"))

		By("every object by dry run")
		r = prove(ctx, g, roundtrip.Options{Source: roundtrip.SourceDryRun})
		Expect(r.Versions[0].Sampled).To(Equal(1000))
		Expect(r.Versions[0].Losses).To(ConsistOf(And(HaveField("Path", "/spec/rare"), HaveField("Objects", rareCarriers))))
	})

	It("passes a lossless webhook, before and after the storage switch", func(ctx SpecContext) {
		w := startWebhook(false)
		g := newGadgets(ctx, &w)
		g.create(ctx, 1000, gadgetSpec)

		r := prove(ctx, g, roundtrip.Options{})
		Expect(r.Source).To(Equal(roundtrip.SourceWebhook))
		Expect(r.Lossless()).To(BeTrue(), r.Message())
		Expect(r.Versions[0].Paths).To(Equal(5)) // color size rare parts/*/name parts/*/count
		g.switchStorage(ctx)
		r = prove(ctx, g, roundtrip.Options{})
		Expect(r.Source).To(Equal(roundtrip.SourceWebhook))
		Expect(r.Lossless()).To(BeTrue(), r.Message())
		Expect(r.Versions[0].Sampled).To(Equal(1000))
		Expect(r.Versions[0].DryRun).To(BeNumerically(">", 0))
	})

	It("reports an accepted loss as accepted, not as a loss", func(ctx SpecContext) {
		w := startWebhook(true)
		g := newGadgets(ctx, &w)
		g.create(ctx, 200, gadgetSpec)
		r := prove(ctx, g, roundtrip.Options{AcceptLoss: []string{"/spec/rare"}})
		Expect(r.Lossless()).To(BeTrue(), r.Message())
		Expect(r.AcceptedLosses()).To(ConsistOf(And(HaveField("Path", "/spec/rare"), HaveField("Objects", 7)))) // i%33 == 0 of 200
		Expect(r.Message()).To(ContainSubstring("but the accepted /spec/rare"))
	})

	It("finds a field the target schema lacks with strategy None, before and after the switch", func(ctx SpecContext) {
		g := newGadgets(ctx, nil)
		g.create(ctx, 300, func(i int) map[string]any {
			spec := map[string]any{"color": "blue"}
			if i == 123 {
				spec["legacy"] = "only in v1"
			}
			return spec
		})
		r := prove(ctx, g, roundtrip.Options{})
		Expect(r.Source).To(Equal(roundtrip.SourcePruning))
		Expect(r.Versions[0].Losses).To(ConsistOf(And(HaveField("Path", "/spec/legacy"),
			HaveField("Examples", ConsistOf("default/gadget-00123")))))
		g.switchStorage(ctx)
		r = prove(ctx, g, roundtrip.Options{})
		Expect(r.Source).To(Equal(roundtrip.SourcePruning))
		Expect(r.Versions[0].DryRun).To(BeNumerically(">", 0))
		Expect(lostPaths(r)).To(ConsistOf("/spec/legacy"))
		r = prove(ctx, g, roundtrip.Options{Sample: true})
		Expect(r.Source).To(Equal(roundtrip.SourceDryRun))
		Expect(lostPaths(r)).To(ConsistOf("/spec/legacy"))
	})

	It("fails, without reporting a loss, when the webhook cannot be reached", func(ctx SpecContext) {
		w := startWebhook(false)
		g := newGadgets(ctx, &w)
		g.create(ctx, 10, gadgetSpec)
		crd := g.fresh(ctx)
		url := "https://127.0.0.1:1/convert"
		crd.Spec.Conversion.Webhook.ClientConfig.URL = &url
		_, err := roundtrip.Prove(ctx, env.Dynamic, crd, roundtrip.Options{Target: "v2"})
		Expect(err).To(MatchError(ContainSubstring("call the conversion webhook")))
	})

	It("proves every object by dry run once the target stores and this process cannot reach the webhook", func(ctx SpecContext) {
		w := startWebhook(true)
		g := newGadgets(ctx, &w)
		g.create(ctx, 100, gadgetSpec)
		g.switchStorage(ctx)
		crd := g.fresh(ctx)
		url := "https://127.0.0.1:1/convert" // the API server reaches w; this process does not reach this
		crd.Spec.Conversion.Webhook.ClientConfig.URL = &url
		r, err := roundtrip.Prove(ctx, env.Dynamic, crd, roundtrip.Options{Target: "v2"})
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Source).To(Equal(roundtrip.SourceDryRun))
		Expect(r.Versions[0].Sampled).To(Equal(100))
		Expect(r.Versions[0].Losses).To(ConsistOf(And(HaveField("Path", "/spec/rare"), HaveField("Objects", 4))))
	})

	It("finds a field one object in 6,000 carries, before and after the switch, every object and the sample alike", func(ctx SpecContext) {
		const n = 6000
		w := startWebhook(true)
		g := newGadgets(ctx, &w)
		g.create(ctx, n, func(i int) map[string]any {
			spec := map[string]any{"color": "red", "size": int64(i)}
			if i == 4321 {
				spec["rare"] = "one in 6000"
			}
			return spec
		})
		oneCarrier := ConsistOf(And(HaveField("Path", "/spec/rare"), HaveField("Objects", 1), HaveField("Carriers", 1),
			HaveField("Examples", ConsistOf("default/gadget-04321"))))

		r := prove(ctx, g, roundtrip.Options{})
		Expect(r.Versions[0].Listed).To(Equal(n))
		Expect(r.Versions[0].Sampled).To(Equal(n))
		Expect(r.Versions[0].Losses).To(oneCarrier)
		r = prove(ctx, g, roundtrip.Options{Sample: true})
		Expect(r.Versions[0].Sampled).To(Equal(18)) // the first 16 sizes, the largest, the one carrier
		Expect(r.Versions[0].Losses).To(oneCarrier)

		g.switchStorage(ctx)
		r = prove(ctx, g, roundtrip.Options{})
		Expect(r.Source).To(Equal(roundtrip.SourceWebhook))
		Expect(r.Versions[0].Losses).To(oneCarrier)
		// What the proof costs beside the migration is measured by `make
		// bench` (its proof section), not here.
	})
})
