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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/crdmigrate"
	"github.com/graduator/graduator/graduationtest"
	"github.com/graduator/graduator/internal/driver"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/test/envtestutil"
)

// The proof as each door runs it, through the one driver: a lossy
// conversion stops the graduation before its first write, with the object's
// content intact at the old version, which stays in storedVersions.
var _ = Describe("Every door refuses a lossy conversion before its first write", func() {
	It("the operator, managed: Blocked ConversionLossy, storage never switched; a lossless webhook clears it with no manual step", func(ctx SpecContext) {
		lossy, lossless := startWebhook(true), startWebhook(false)
		g := newGadgets(ctx, &lossy)
		g.create(ctx, 1000, gadgetSpec)
		before := g.resourceVersions(ctx)
		startOperator()
		createPolicy(ctx, g, graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v2"})

		By("the proof, asked of the webhook before the switch, finds the loss")
		policy := waitBlockedLossy(ctx, g)
		Expect(policy.Status.RoundTrip).NotTo(BeNil())
		Expect(policy.Status.RoundTrip.Source).To(Equal("Webhook"))
		Expect(policy.Status.RoundTrip.Losses).To(ContainElement(HaveField("Path", "/spec/rare")))
		Eventually(policyEvents(ctx, g.crd.Name)).Should(ContainElement(And(
			HaveField("Reason", graduation.ReasonConversionLossy), HaveField("Type", "Warning"))))
		Consistently(func(g2 Gomega) {
			crd := g.fresh(ctx)
			g2.Expect(storageVersion(crd)).To(Equal("v1"), "the storage version was switched")
			g2.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1"}))
		}).WithTimeout(3 * time.Second).Should(Succeed())
		Expect(g.resourceVersions(ctx)).To(Equal(before), "an object was written")
		g.expectIntactAtV1(ctx)

		By("pointing the CRD at a lossless conversion")
		g.convertWith(ctx, lossless)
		Eventually(policyPhase(ctx, g.crd.Name)).WithTimeout(3 * time.Minute).Should(Equal(graduatorv1alpha1.PhaseGraduated))
		Expect(g.fresh(ctx).Status.StoredVersions).To(Equal([]string{"v2"}))
		g.expectStoredAll(ctx, g.group+"/v2")
		g.expectRareKept(ctx, g.v2)
	})

	It("the operator, GitOps: Blocked ConversionLossy, no object rewritten, v1 still in storedVersions", func(ctx SpecContext) {
		lossy := startWebhook(true)
		g := newGadgets(ctx, &lossy)
		g.create(ctx, 1000, gadgetSpec)
		startOperator()
		createPolicy(ctx, g, graduatorv1alpha1.CRDVersionPolicySpec{})
		By("a release of the CRD that stores v2")
		g.switchStorage(ctx)
		before := g.resourceVersions(ctx)

		policy := waitBlockedLossy(ctx, g)
		Expect(policy.Status.RoundTrip.Source).To(Equal("Webhook"))
		Expect(policy.Status.RoundTrip.DryRun).To(BeNumerically(">", 0))
		Consistently(func(g2 Gomega) {
			g2.Expect(g.fresh(ctx).Status.StoredVersions).To(ContainElement("v1"))
		}).WithTimeout(3 * time.Second).Should(Succeed())
		Expect(g.resourceVersions(ctx)).To(Equal(before), "an object was written")
		g.expectIntactAtV1(ctx)
	})

	It("the operator: an accepted path lets the graduation finish, and the status says what was accepted", func(ctx SpecContext) {
		lossy := startWebhook(true)
		g := newGadgets(ctx, &lossy)
		g.create(ctx, 300, gadgetSpec)
		startOperator()
		createPolicy(ctx, g, graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v2",
			Migration: graduatorv1alpha1.MigrationSettings{AcceptLoss: []string{"/spec/rare"}}})

		Eventually(policyPhase(ctx, g.crd.Name)).WithTimeout(3 * time.Minute).Should(Equal(graduatorv1alpha1.PhaseGraduated))
		policy := getPolicy(ctx, g.crd.Name)
		Expect(policy.Status.RoundTrip).NotTo(BeNil())
		Expect(policy.Status.RoundTrip.Lossless).To(BeTrue())
		Expect(policy.Status.RoundTrip.Losses).To(BeEmpty())
		Expect(policy.Status.RoundTrip.Accepted).To(ConsistOf(HaveField("Path", "/spec/rare")))
		Expect(g.fresh(ctx).Status.StoredVersions).To(Equal([]string{"v2"}))
		g.expectStoredAll(ctx, g.group+"/v2")
	})

	It("the embedded controller: reports ConversionLossy on the CRD and rewrites nothing", func(ctx SpecContext) {
		lossy := startWebhook(true)
		g := newGadgets(ctx, &lossy)
		g.create(ctx, 1000, gadgetSpec)
		startCRDMigrate(crdmigrate.Options{CRDs: []string{g.crd.Name}, SettleDelay: time.Second})
		By("a release of the CRD that stores v2")
		g.switchStorage(ctx)
		before := g.resourceVersions(ctx)

		Eventually(crdEvents(ctx, g.crd.Name)).WithTimeout(2 * time.Minute).Should(ContainElement(And(
			HaveField("Reason", graduation.ReasonConversionLossy), HaveField("Type", "Warning"),
			HaveField("Note", ContainSubstring("v1 -> v2 -> v1 loses /spec/rare")))))
		Eventually(func(g2 Gomega) {
			state := g.fresh(ctx).Annotations[driver.StateAnnotation]
			var saved graduatorv1alpha1.CRDVersionPolicyStatus
			g2.Expect(json.Unmarshal([]byte(state), &saved)).To(Succeed(), state)
			g2.Expect(saved.Phase).To(Equal(graduatorv1alpha1.PhaseBlocked))
		}).Should(Succeed())
		Consistently(func(g2 Gomega) {
			g2.Expect(g.fresh(ctx).Status.StoredVersions).To(ContainElement("v1"))
		}).WithTimeout(3 * time.Second).Should(Succeed())
		Expect(g.resourceVersions(ctx)).To(Equal(before), "an object was written")
		g.expectIntactAtV1(ctx)
	})

	It("graduationtest: fails before the first write with the sentence of the loss", func(ctx SpecContext) {
		lossy := startWebhook(true)
		g := newGadgets(ctx, &lossy)
		g.create(ctx, 1000, gadgetSpec)
		before := g.resourceVersions(ctx)
		rehearsal, err := graduationtest.NewE(env.Environment, graduationtest.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(rehearsal.Close)

		_, err = rehearsal.TryGraduate(ctx, g.crd.Name, "v2")
		Expect(err).To(MatchError(ContainSubstring("v1 -> v2 -> v1 loses /spec/rare on ")))
		Expect(err.Error()).To(ContainSubstring("on 31 of 1000 Gadgets"))
		crd := g.fresh(ctx)
		Expect(storageVersion(crd)).To(Equal("v1"), "the storage version was switched")
		Expect(crd.Status.StoredVersions).To(Equal([]string{"v1"}))
		Expect(g.resourceVersions(ctx)).To(Equal(before), "an object was written")
		g.expectIntactAtV1(ctx)
	})
})

// startOperator runs Graduator's manager until the spec ends.
func startOperator() {
	GinkgoHelper()
	op, err := envtestutil.StartOperator(rest.CopyConfig(env.Config), env.Scheme)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(op.Stop()).To(Succeed()) })
}

// startCRDMigrate runs a manager with nothing but crdmigrate in it, as an
// operator that embeds it would, until the spec ends.
func startCRDMigrate(opts crdmigrate.Options) {
	GinkgoHelper()
	mgr, err := envtestutil.StartManager(rest.CopyConfig(env.Config), env.Scheme,
		func(m ctrl.Manager) error { return crdmigrate.Add(m, opts) })
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(mgr.Stop()).To(Succeed()) })
}

// createPolicy creates the policy named after g's CRD, with a short settle
// delay, and deletes it when the spec ends.
func createPolicy(ctx context.Context, g gadgets, spec graduatorv1alpha1.CRDVersionPolicySpec) {
	GinkgoHelper()
	spec.Migration.SettleDelay = &metav1.Duration{Duration: time.Second}
	policy := &graduatorv1alpha1.CRDVersionPolicy{ObjectMeta: metav1.ObjectMeta{Name: g.crd.Name}, Spec: spec}
	Expect(env.Client.Create(ctx, policy)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(env.Client.Delete(ctx, policy))).To(Succeed())
	})
}

func getPolicy(ctx context.Context, name string) *graduatorv1alpha1.CRDVersionPolicy {
	GinkgoHelper()
	policy := &graduatorv1alpha1.CRDVersionPolicy{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, policy)).To(Succeed())
	return policy
}

func policyPhase(ctx context.Context, name string) func() graduatorv1alpha1.Phase {
	return func() graduatorv1alpha1.Phase { return getPolicy(ctx, name).Status.Phase }
}

// waitBlockedLossy waits for the policy of g's CRD to say what a user
// checks: phase Blocked, Ready and PreflightPassed False for
// ConversionLossy, the lost path named.
func waitBlockedLossy(ctx context.Context, g gadgets) *graduatorv1alpha1.CRDVersionPolicy {
	GinkgoHelper()
	var policy *graduatorv1alpha1.CRDVersionPolicy
	Eventually(func(g2 Gomega) {
		policy = getPolicy(ctx, g.crd.Name)
		g2.Expect(policy.Status.Phase).To(Equal(graduatorv1alpha1.PhaseBlocked))
		for _, t := range []string{graduatorv1alpha1.ConditionReady, graduatorv1alpha1.ConditionPreflightPassed} {
			c := apimeta.FindStatusCondition(policy.Status.Conditions, t)
			g2.Expect(c).NotTo(BeNil(), t)
			g2.Expect(c.Status).To(Equal(metav1.ConditionFalse), t)
			g2.Expect(c.Reason).To(Equal(graduation.ReasonConversionLossy), t)
			g2.Expect(c.Message).To(ContainSubstring("v1 -> v2 -> v1 loses /spec/rare"), t)
		}
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	return policy
}

// storageVersion is the version the CRD stores.
func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

// expectIntactAtV1 reads every gadget at v1: each carrier of spec.rare
// still has it, and etcd stores every one as v1.
func (g gadgets) expectIntactAtV1(ctx context.Context) {
	GinkgoHelper()
	g.expectRareKept(ctx, g.v1)
	g.expectStoredAll(ctx, g.group+"/v1")
}

// expectRareKept counts the gadgets read through gvr that carry spec.rare.
func (g gadgets) expectRareKept(ctx context.Context, gvr schema.GroupVersionResource) {
	GinkgoHelper()
	list, err := env.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	carriers, objects := 0, 0
	for _, o := range list.Items {
		objects++
		if _, found, _ := unstructured.NestedString(o.Object, "spec", "rare"); found {
			carriers++
		}
	}
	want := 0
	for i := range objects {
		if i%33 == 0 {
			want++
		}
	}
	Expect(carriers).To(Equal(want), "gadgets that still carry spec.rare")
}

// expectStoredAll reads etcd: every gadget is stored as apiVersion.
func (g gadgets) expectStoredAll(ctx context.Context, apiVersion string) {
	GinkgoHelper()
	stored, err := env.Etcd.APIVersions(ctx, g.group, "gadgets")
	Expect(err).NotTo(HaveOccurred())
	Expect(stored).NotTo(BeEmpty())
	for key, v := range stored {
		Expect(v).To(Equal(apiVersion), key)
	}
}

// convertWith points the CRD's conversion at w.
func (g gadgets) convertWith(ctx context.Context, w webhookProcess) {
	GinkgoHelper()
	crd := g.fresh(ctx)
	crd.Spec.Conversion.Webhook.ClientConfig.URL = &w.url
	crd.Spec.Conversion.Webhook.ClientConfig.CABundle = w.ca
	Expect(env.Client.Update(ctx, crd)).To(Succeed())
}

// policyEvents and crdEvents return the Events about the policy or the CRD
// named name.
func policyEvents(ctx context.Context, name string) func() ([]eventsv1.Event, error) {
	return func() ([]eventsv1.Event, error) {
		return envtestutil.EventsAbout(ctx, env.Client, "CRDVersionPolicy", name)
	}
}

func crdEvents(ctx context.Context, name string) func() ([]eventsv1.Event, error) {
	return func() ([]eventsv1.Event, error) {
		return envtestutil.EventsAbout(ctx, env.Client, "CustomResourceDefinition", name)
	}
}
