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
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/crdmigrate"
	"github.com/graduator/graduator/graduationtest"
	"github.com/graduator/graduator/internal/driver"
	"github.com/graduator/graduator/internal/graduation"
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

var uniqueLostPaths = []string{"/spec/instance", "/spec/region"}

// A conversion's bug lives in the one value a sample did not keep: one
// object of uniquePopulation triggers each loss, through a value no other
// object holds or a pair of values no other object holds. The default
// proof converts every object, so every door refuses before its first
// write, and nothing is lost.
var _ = Describe("A loss only one object's value triggers", Ordered, func() {
	// 3,000 in `make test`; `make test-proof-scale` proves 100,000.
	uniquePopulation := 3000
	if n, err := strconv.Atoi(os.Getenv("ROUNDTRIP_UNIQUE_N")); err == nil && n > 2345 {
		uniquePopulation = n
	}
	var (
		g          gadgets
		lossless   webhookProcess
		before     map[string]string
		kubeconfig string
	)
	BeforeAll(func(ctx SpecContext) {
		lossy := startWebhookWith("--lossy-unique")
		lossless = startWebhookWith()
		g = newGadgets(ctx, &lossy, uniqueFields)
		g.create(ctx, uniquePopulation, uniqueSpec)
		before = g.resourceVersions(ctx)
		kubeconfig = writeKubeconfig()
	})

	// expectNothingLost: no gadget was written, etcd holds each as v1, and
	// each reads back at v1 as it was created.
	expectNothingLost := func(ctx context.Context) {
		GinkgoHelper()
		Expect(g.resourceVersions(ctx)).To(Equal(before), "a gadget was written")
		g.expectStoredAll(ctx, g.group+"/v1")
		expectSpecsAtV1(ctx, g, uniquePopulation, uniqueSpec)
	}
	// namesBoth: a refusal names both paths, each on 1 of every gadget,
	// with the one gadget that loses it.
	namesBoth := func(msg string) {
		GinkgoHelper()
		Expect(msg).To(ContainSubstring(fmt.Sprintf("/spec/region on 1 of %d Gadgets (default/%s)", uniquePopulation, uniqueRegion)))
		Expect(msg).To(ContainSubstring(fmt.Sprintf("/spec/instance on 1 of %d Gadgets (default/%s)", uniquePopulation, uniquePair)))
	}

	It("graduator prove exits 1 naming both gadgets; --sample, the opt-out, sees the declared region but not the pair", func(ctx SpecContext) {
		code, out, _ := graduatorCLI(ctx, kubeconfig, "prove", g.crd.Name, "--to", "v2")
		Expect(code).To(Equal(1))
		for _, p := range uniqueLostPaths {
			Expect(out).To(ContainSubstring("LOST      "+p+" at v1: 1 of"), p)
		}
		code, out, _ = graduatorCLI(ctx, kubeconfig, "prove", g.crd.Name, "--to", "v2", "--sample")
		Expect(code).To(Equal(1))
		Expect(out).To(ContainSubstring("LOST      /spec/region at v1"))
		Expect(out).NotTo(ContainSubstring("/spec/instance"))
		expectNothingLost(ctx)
	})

	It("a managed policy: Blocked ConversionLossy naming both gadgets; the storage never switched", func(ctx SpecContext) {
		startOperator()
		createPolicy(ctx, g, graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v2"})
		policy := waitBlockedOn(ctx, g, proofTime(uniquePopulation), namesBoth)
		Expect(policy.Status.RoundTrip.Source).To(Equal("Webhook"))
		Expect(policy.Status.RoundTrip.Scope).To(Equal(graduatorv1alpha1.RoundTripProofEvery))
		Expect(policy.Status.RoundTrip.Sampled).To(BeEquivalentTo(uniquePopulation))
		crd := g.fresh(ctx)
		Expect(storageVersion(crd)).To(Equal("v1"), "the storage version was switched")
		Expect(crd.Status.StoredVersions).To(Equal([]string{"v1"}))
		expectNothingLost(ctx)
	})

	It("graduationtest: TryGraduate fails before the first write, naming both gadgets", func(ctx SpecContext) {
		rehearsal, err := graduationtest.NewE(env.Environment, graduationtest.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(rehearsal.Close)
		_, err = rehearsal.TryGraduate(ctx, g.crd.Name, "v2")
		Expect(err).To(HaveOccurred())
		namesBoth(err.Error())
		Expect(storageVersion(g.fresh(ctx))).To(Equal("v1"), "the storage version was switched")
		expectNothingLost(ctx)
	})

	It("a GitOps policy, once a release stores v2: Blocked, every gadget proven through the webhook and the class sample by a dry run", func(ctx SpecContext) {
		g.switchStorage(ctx)
		startOperator()
		createPolicy(ctx, g, graduatorv1alpha1.CRDVersionPolicySpec{})
		policy := waitBlockedOn(ctx, g, proofTime(uniquePopulation), namesBoth)
		Expect(policy.Status.RoundTrip.Source).To(Equal("Webhook"))
		Expect(policy.Status.RoundTrip.DryRun).To(BeNumerically(">", 0))
		Consistently(func(g2 Gomega) {
			g2.Expect(g.fresh(ctx).Status.StoredVersions).To(ContainElement("v1"))
		}).WithTimeout(3 * time.Second).Should(Succeed())
		expectNothingLost(ctx)
	})

	It("graduator migrate --prune exits 1 naming both gadgets, and writes nothing", func(ctx SpecContext) {
		code, _, msg := graduatorCLI(ctx, kubeconfig, "migrate", g.crd.Name, "--prune", "--quiet")
		Expect(code).To(Equal(1))
		Expect(msg).To(ContainSubstring(graduation.ReasonConversionLossy))
		namesBoth(msg)
		Expect(g.fresh(ctx).Status.StoredVersions).To(ContainElement("v1"))
		expectNothingLost(ctx)
	})

	It("the embedded controller: Blocked on the CRD, naming both gadgets, nothing rewritten", func(ctx SpecContext) {
		startCRDMigrate(crdmigrate.Options{CRDs: []string{g.crd.Name}, SettleDelay: time.Second})
		Eventually(func(g2 Gomega) {
			state := g.fresh(ctx).Annotations[driver.StateAnnotation]
			var saved graduatorv1alpha1.CRDVersionPolicyStatus
			g2.Expect(json.Unmarshal([]byte(state), &saved)).To(Succeed(), state)
			g2.Expect(saved.Phase).To(Equal(graduatorv1alpha1.PhaseBlocked))
			g2.Expect(saved.RoundTrip).NotTo(BeNil())
			g2.Expect(saved.RoundTrip.Losses).To(ConsistOf(HaveField("Path", "/spec/instance"), HaveField("Path", "/spec/region")))
		}).WithTimeout(proofTime(uniquePopulation)).Should(Succeed())
		expectNothingLost(ctx)
	})

	It("the same conversion made lossless: prove exits 0, migrate --prune graduates, every value reads back at v1", func(ctx SpecContext) {
		g.convertWith(ctx, lossless)
		code, _, _ := graduatorCLI(ctx, kubeconfig, "prove", g.crd.Name)
		Expect(code).To(Equal(0))
		code, _, _ = graduatorCLI(ctx, kubeconfig, "migrate", g.crd.Name, "--prune", "--quiet")
		Expect(code).To(Equal(0))
		Expect(g.fresh(ctx).Status.StoredVersions).To(Equal([]string{"v2"}))
		g.expectStoredAll(ctx, g.group+"/v2")
		expectSpecsAtV1(ctx, g, uniquePopulation, uniqueSpec)
	})
})

// proofTime bounds a door's wait for its proof of n objects: two minutes,
// and a second more for each 500 objects.
func proofTime(n int) time.Duration {
	return 2*time.Minute + time.Duration(n/500)*time.Second
}

// waitBlockedOn waits up to timeout for the policy of g's CRD to be
// Blocked for ConversionLossy, its Ready message passing check.
func waitBlockedOn(ctx context.Context, g gadgets, timeout time.Duration, check func(msg string)) *graduatorv1alpha1.CRDVersionPolicy {
	GinkgoHelper()
	var policy *graduatorv1alpha1.CRDVersionPolicy
	Eventually(func(g2 Gomega) {
		policy = getPolicy(ctx, g.crd.Name)
		g2.Expect(policy.Status.Phase).To(Equal(graduatorv1alpha1.PhaseBlocked))
		c := apimeta.FindStatusCondition(policy.Status.Conditions, graduatorv1alpha1.ConditionReady)
		g2.Expect(c).NotTo(BeNil())
		g2.Expect(c.Reason).To(Equal(graduation.ReasonConversionLossy))
		g2.Expect(policy.Status.RoundTrip).NotTo(BeNil())
	}).WithTimeout(timeout).Should(Succeed())
	check(apimeta.FindStatusCondition(policy.Status.Conditions, graduatorv1alpha1.ConditionReady).Message)
	return policy
}

// expectSpecsAtV1 reads every gadget at v1: each holds the spec it was
// created with.
func expectSpecsAtV1(ctx context.Context, g gadgets, n int, specOf func(i int) map[string]any) {
	GinkgoHelper()
	var wrong []string
	read := 0
	g.each(ctx, g.v1, func(o *unstructured.Unstructured) {
		read++
		var i int
		_, _ = fmt.Sscanf(o.GetName(), "gadget-%05d", &i)
		spec, _ := o.Object["spec"].(map[string]any)
		for field, want := range specOf(i) {
			if got, ok := spec[field]; !ok || fmt.Sprint(got) != fmt.Sprint(want) {
				wrong = append(wrong, fmt.Sprintf("%s spec.%s = %v, want %v", o.GetName(), field, got, want))
			}
		}
	})
	Expect(read).To(Equal(n))
	Expect(wrong).To(BeEmpty(), strings.Join(wrong, "; "))
}
