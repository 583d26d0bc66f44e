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
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// lossyFixture is a population of gadgets behind a lossy conversion: every
// door must refuse it at the default settings before its first write.
type lossyFixture struct {
	g          gadgets
	before     map[string]string
	kubeconfig string
	// lossless is the same conversion without the loss, for the ending.
	lossless webhookProcess
	n        int
	spec     func(i int) map[string]any
	// losses are what the conversion loses, as a refusal names them.
	losses []loss
}

// loss is one lost path as a refusal names it: "PATH on OBJECTS of N
// Gadgets (default/EXAMPLE...)".
type loss struct {
	path    string
	objects int
	// example, when set, is the one gadget that loses it.
	example string
}

// newLossyFixture starts the lossy webhook (its flags) and the lossless
// one, installs the CRD with the extra fields and creates n gadgets, until
// the container ends.
func newLossyFixture(ctx context.Context, n int, spec func(i int) map[string]any, losses []loss, lossyArgs []string,
	extra ...map[string]apiextensionsv1.JSONSchemaProps) *lossyFixture {
	GinkgoHelper()
	lossy := startWebhookWith(lossyArgs...)
	f := &lossyFixture{lossless: startWebhookWith(), n: n, spec: spec, losses: losses}
	f.g = newGadgets(ctx, &lossy, extra...)
	f.g.create(ctx, n, spec)
	f.before = f.g.resourceVersions(ctx)
	f.kubeconfig = writeKubeconfig()
	return f
}

// paths are the lost paths, in the order the fixture declares them.
func (f *lossyFixture) paths() []string {
	var out []string
	for _, l := range f.losses {
		out = append(out, l.path)
	}
	return out
}

// expectNamed: a refusal's words name every loss, on how many gadgets of
// the population, and the one gadget where the fixture has one.
func (f *lossyFixture) expectNamed(words string) {
	GinkgoHelper()
	for _, l := range f.losses {
		named := fmt.Sprintf("%s on %d of %d Gadgets (", l.path, l.objects, f.n)
		if l.example != "" {
			named += "default/" + l.example
		}
		Expect(words).To(ContainSubstring(named), l.path)
	}
}

// expectNothingWritten: no gadget was written, etcd holds each as v1, and
// each reads back at v1 as it was created.
func (f *lossyFixture) expectNothingWritten(ctx context.Context) {
	GinkgoHelper()
	Expect(f.g.resourceVersions(ctx)).To(Equal(f.before), "a gadget was written")
	f.g.expectStoredAll(ctx, f.g.group+"/v1")
	expectSpecsAtV1(ctx, f.g, f.n, f.spec)
}

// proofTime bounds a door's wait for its proof of the population: two
// minutes, and a second more for each 500 objects.
func (f *lossyFixture) proofTime() time.Duration {
	return 2*time.Minute + time.Duration(f.n/500)*time.Second
}

// door is one way in to a graduation. refuse runs it on the fixture's CRD
// at the default settings, checks what that door shows of its refusal (an
// exit code, a phase, storedVersions) and returns the refusal's words.
// Doors run in the table's order on one population: the GitOps door
// switches the storage to v2, as a release of the CRD would, for the
// doors after it.
type door struct {
	name string
	// report: its words are a report of the losses, not the refusal's
	// sentence that names each (expectNamed).
	report bool
	refuse func(ctx context.Context, f *lossyFixture) string
}

// doorRow is a door of a fixture's table; also checks what this fixture
// shows at this door besides (nil: nothing).
type doorRow struct {
	door
	also func(ctx context.Context, f *lossyFixture, words string)
}

// walkDoors declares one spec per row: the door refuses, names every loss,
// and no gadget was written.
func walkDoors(f func() *lossyFixture, rows ...doorRow) {
	for _, row := range rows {
		It(row.name+": refuses before its first write, naming every loss; nothing written", func(ctx SpecContext) {
			fixture := f()
			words := row.refuse(ctx, fixture)
			if !row.report {
				fixture.expectNamed(words)
			}
			if row.also != nil {
				row.also(ctx, fixture, words)
			}
			fixture.expectNothingWritten(ctx)
		})
	}
}

var (
	// proveDoor is `graduator prove`: exit 1, each path LOST; its words
	// are the report (a table, not the refusal's sentence).
	proveDoor = door{"graduator prove", true, func(ctx context.Context, f *lossyFixture) string {
		code, out, msg := graduatorCLI(ctx, f.kubeconfig, "prove", f.g.crd.Name, "--to", "v2")
		Expect(code).To(Equal(1))
		for _, p := range f.paths() {
			Expect(out).To(ContainSubstring("LOST      "+p+" at v1: "), p)
		}
		return out + "\n" + msg
	}}
	// managedDoor is a managed policy (storageVersion v2): Blocked
	// ConversionLossy, the storage never switched.
	managedDoor = door{"the operator, a managed policy", false, func(ctx context.Context, f *lossyFixture) string {
		startOperator()
		createPolicy(ctx, f.g, graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v2"})
		policy, words := waitBlocked(ctx, f)
		Expect(policy.Status.RoundTrip.Source).To(Equal("Webhook"))
		Consistently(func(g Gomega) {
			crd := f.g.fresh(ctx)
			g.Expect(storageVersion(crd)).To(Equal("v1"), "the storage version was switched")
			g.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1"}))
		}).WithTimeout(3 * time.Second).Should(Succeed())
		return words
	}}
	// gitOpsDoor is a GitOps policy once a release stores v2: Blocked
	// ConversionLossy, the class sample dry-run, v1 kept in storedVersions.
	gitOpsDoor = door{"the operator, a GitOps policy once a release stores v2", false, func(ctx context.Context, f *lossyFixture) string {
		if storageVersion(f.g.fresh(ctx)) != "v2" {
			f.g.switchStorage(ctx)
		}
		startOperator()
		createPolicy(ctx, f.g, graduatorv1alpha1.CRDVersionPolicySpec{})
		policy, words := waitBlocked(ctx, f)
		Expect(policy.Status.RoundTrip.Source).To(Equal("Webhook"))
		Expect(policy.Status.RoundTrip.DryRun).To(BeNumerically(">", 0))
		Consistently(func(g Gomega) {
			g.Expect(f.g.fresh(ctx).Status.StoredVersions).To(ContainElement("v1"))
		}).WithTimeout(3 * time.Second).Should(Succeed())
		return words
	}}
	// migrateDoor is `graduator migrate --prune`: exit 1, ConversionLossy,
	// v1 kept in storedVersions.
	migrateDoor = door{"graduator migrate --prune", false, func(ctx context.Context, f *lossyFixture) string {
		code, _, msg := graduatorCLI(ctx, f.kubeconfig, "migrate", f.g.crd.Name, "--prune", "--quiet")
		Expect(code).To(Equal(1))
		Expect(msg).To(ContainSubstring(graduation.ReasonConversionLossy))
		Expect(f.g.fresh(ctx).Status.StoredVersions).To(ContainElement("v1"))
		return msg
	}}
	// rehearsalDoor is graduationtest's TryGraduate: an error before the
	// first write, the storage never switched.
	rehearsalDoor = door{"graduationtest", false, func(ctx context.Context, f *lossyFixture) string {
		rehearsal, err := graduationtest.NewE(env.Environment, graduationtest.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(rehearsal.Close)
		storage := storageVersion(f.g.fresh(ctx))
		_, err = rehearsal.TryGraduate(ctx, f.g.crd.Name, "v2")
		Expect(err).To(HaveOccurred())
		Expect(storageVersion(f.g.fresh(ctx))).To(Equal(storage), "the storage version was switched")
		Expect(f.g.fresh(ctx).Status.StoredVersions).To(ContainElement("v1"))
		return err.Error()
	}}
	// embeddedDoor is crdmigrate in another manager: Blocked in the state it
	// saves on the CRD, v1 kept in storedVersions.
	embeddedDoor = door{"the embedded controller", false, func(ctx context.Context, f *lossyFixture) string {
		startCRDMigrate(crdmigrate.Options{CRDs: []string{f.g.crd.Name}, SettleDelay: time.Second})
		var saved graduatorv1alpha1.CRDVersionPolicyStatus
		Eventually(func(g Gomega) {
			state := f.g.fresh(ctx).Annotations[driver.StateAnnotation]
			g.Expect(json.Unmarshal([]byte(state), &saved)).To(Succeed(), state)
			g.Expect(saved.Phase).To(Equal(graduatorv1alpha1.PhaseBlocked))
			g.Expect(saved.RoundTrip).NotTo(BeNil())
		}).WithTimeout(f.proofTime()).Should(Succeed())
		var paths []string
		for _, l := range saved.RoundTrip.Losses {
			paths = append(paths, l.Path)
		}
		Expect(paths).To(ConsistOf(f.paths()))
		Expect(f.g.fresh(ctx).Status.StoredVersions).To(ContainElement("v1"))
		ready := apimeta.FindStatusCondition(saved.Conditions, graduatorv1alpha1.ConditionReady)
		Expect(ready).NotTo(BeNil())
		Expect(ready.Reason).To(Equal(graduation.ReasonConversionLossy))
		return ready.Message
	}}
)

// The path fixture: a conversion that drops spec.rare, which 31 of 1,000
// gadgets carry.
var _ = Describe("Every door refuses a lossy conversion before its first write", Ordered, func() {
	var f *lossyFixture
	BeforeAll(func(ctx SpecContext) {
		f = newLossyFixture(ctx, 1000, gadgetSpec, []loss{{path: "/spec/rare", objects: rareCarriers}}, []string{"--lossy"})
	})
	fixture := func() *lossyFixture { return f }

	walkDoors(fixture,
		doorRow{managedDoor, func(ctx context.Context, f *lossyFixture, _ string) {
			Expect(getPolicy(ctx, f.g.crd.Name).Status.RoundTrip.Losses).To(ContainElement(HaveField("Path", "/spec/rare")))
			Eventually(policyEvents(ctx, f.g.crd.Name)).Should(ContainElement(And(
				HaveField("Reason", graduation.ReasonConversionLossy), HaveField("Type", "Warning"))))
		}},
		doorRow{rehearsalDoor, nil},
		doorRow{gitOpsDoor, nil},
		doorRow{embeddedDoor, func(ctx context.Context, f *lossyFixture, _ string) {
			Eventually(crdEvents(ctx, f.g.crd.Name)).Should(ContainElement(And(
				HaveField("Reason", graduation.ReasonConversionLossy), HaveField("Type", "Warning"),
				HaveField("Note", ContainSubstring("v1 -> v2 -> v1 loses /spec/rare")))))
		}},
	)

	It("a policy Blocked on the loss graduates once the CRD points at a lossless conversion, with no manual step", func(ctx SpecContext) {
		startOperator()
		createPolicy(ctx, f.g, graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v2"})
		waitBlocked(ctx, f)
		f.g.convertWith(ctx, f.lossless)
		Eventually(policyPhase(ctx, f.g.crd.Name)).WithTimeout(3 * time.Minute).Should(Equal(graduatorv1alpha1.PhaseGraduated))
		Expect(f.g.fresh(ctx).Status.StoredVersions).To(Equal([]string{"v2"}))
		f.g.expectStoredAll(ctx, f.g.group+"/v2")
		expectSpecsAtV1(ctx, f.g, f.n, f.spec)
	})
})

var _ = Describe("A lossy conversion with its path accepted", func() {
	It("the operator: the graduation finishes, and the status says what was accepted", func(ctx SpecContext) {
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

// waitBlocked waits for the policy of f's CRD to say what a user checks:
// phase Blocked, Ready and PreflightPassed False for ConversionLossy, the
// round trip in its status. It returns the policy and Ready's message.
func waitBlocked(ctx context.Context, f *lossyFixture) (*graduatorv1alpha1.CRDVersionPolicy, string) {
	GinkgoHelper()
	var policy *graduatorv1alpha1.CRDVersionPolicy
	Eventually(func(g Gomega) {
		policy = getPolicy(ctx, f.g.crd.Name)
		g.Expect(policy.Status.Phase).To(Equal(graduatorv1alpha1.PhaseBlocked))
		for _, t := range []string{graduatorv1alpha1.ConditionReady, graduatorv1alpha1.ConditionPreflightPassed} {
			c := apimeta.FindStatusCondition(policy.Status.Conditions, t)
			g.Expect(c).NotTo(BeNil(), t)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse), t)
			g.Expect(c.Reason).To(Equal(graduation.ReasonConversionLossy), t)
		}
		g.Expect(policy.Status.RoundTrip).NotTo(BeNil())
	}).WithTimeout(f.proofTime()).Should(Succeed())
	return policy, apimeta.FindStatusCondition(policy.Status.Conditions, graduatorv1alpha1.ConditionReady).Message
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
