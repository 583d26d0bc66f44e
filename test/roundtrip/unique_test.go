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
	"fmt"
	"os"
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
)

// uniqueFields: forty declared regions, more than a sample keeps of a
// path's values; an instance type and an architecture, each value common,
// one pair held by one object only.
var uniqueFields = func() map[string]apiextensionsv1.JSONSchemaProps {
	regions := make([]apiextensionsv1.JSON, 40)
	for i := range regions {
		regions[i] = apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf("%q", region(i)))}
	}
	return map[string]apiextensionsv1.JSONSchemaProps{
		"region":   {Type: "string", Enum: regions},
		"instance": {Type: "string"},
		"arch":     {Type: "string"},
	}
}()

func region(i int) string { return fmt.Sprintf("region-%02d", i) }

// The only gadget holding region-37, and the only one holding instance xl
// on arch arm64.
const (
	uniqueRegion = "gadget-01234"
	uniquePair   = "gadget-02345"
)

// uniqueSpec is the spec of gadget i: thirty regions in turn, the three
// instance types in turn, arm64 on a fifth of the small and large ones.
func uniqueSpec(i int) map[string]any {
	instance := []string{"small", "large", "xl"}[i%3]
	arch := "amd64"
	if i%3 != 2 && i%5 == 0 {
		arch = "arm64"
	}
	spec := map[string]any{"color": "red", "region": region(i % 30), "instance": instance, "arch": arch}
	switch fmt.Sprintf("gadget-%05d", i) {
	case uniqueRegion:
		spec["region"] = region(37)
	case uniquePair:
		spec["instance"], spec["arch"] = "xl", "arm64"
	}
	return spec
}

// A conversion's bug lives in the one value a sample did not keep: one
// object of the population triggers each loss, through a value no other
// object holds or a pair of values no other object holds. The default
// proof converts every object, so every door refuses before its first
// write, and nothing is lost.
var _ = Describe("A loss only one object's value triggers", Ordered, func() {
	// 3,000 in `make test`; `make test-proof-scale` proves 100,000.
	uniquePopulation := 3000
	if n, err := strconv.Atoi(os.Getenv("ROUNDTRIP_UNIQUE_N")); err == nil && n > 2345 {
		uniquePopulation = n
	}
	var f *lossyFixture
	BeforeAll(func(ctx SpecContext) {
		f = newLossyFixture(ctx, uniquePopulation, uniqueSpec, []loss{{path: "/spec/instance", objects: 1, example: uniquePair},
			{path: "/spec/region", objects: 1, example: uniqueRegion}}, []string{"--lossy-unique"}, uniqueFields)
	})

	walkDoors(func() *lossyFixture { return f },
		doorRow{proveDoor, func(ctx context.Context, f *lossyFixture, _ string) {
			By("--sample, the opt-out, sees the declared region but not the pair")
			code, out, _ := graduatorCLI(ctx, f.kubeconfig, "prove", f.g.crd.Name, "--to", "v2", "--sample")
			Expect(code).To(Equal(1))
			Expect(out).To(ContainSubstring("LOST      /spec/region at v1"))
			Expect(out).NotTo(ContainSubstring("/spec/instance"))
		}},
		doorRow{managedDoor, func(ctx context.Context, f *lossyFixture, _ string) {
			policy := getPolicy(ctx, f.g.crd.Name)
			Expect(policy.Status.RoundTrip.Scope).To(Equal(graduatorv1alpha1.RoundTripProofEvery))
			Expect(policy.Status.RoundTrip.Sampled).To(BeEquivalentTo(f.n))
		}},
		doorRow{rehearsalDoor, nil},
		doorRow{gitOpsDoor, nil},
		doorRow{migrateDoor, nil},
		doorRow{embeddedDoor, nil},
	)

	It("the same conversion made lossless: prove exits 0, migrate --prune graduates, every value reads back at v1", func(ctx SpecContext) {
		f.expectGraduatesLossless(ctx)
	})
})

// expectGraduatesLossless points the CRD at the lossless conversion: prove
// exits 0, migrate --prune graduates, every gadget reads back at v1 as it
// was created.
func (f *lossyFixture) expectGraduatesLossless(ctx context.Context) {
	GinkgoHelper()
	f.g.convertWith(ctx, f.lossless)
	code, _, _ := graduatorCLI(ctx, f.kubeconfig, "prove", f.g.crd.Name)
	Expect(code).To(Equal(0))
	code, _, _ = graduatorCLI(ctx, f.kubeconfig, "migrate", f.g.crd.Name, "--prune", "--quiet")
	Expect(code).To(Equal(0))
	Expect(f.g.fresh(ctx).Status.StoredVersions).To(Equal([]string{"v2"}))
	f.g.expectStoredAll(ctx, f.g.group+"/v2")
	expectSpecsAtV1(ctx, f.g, f.n, f.spec)
}
