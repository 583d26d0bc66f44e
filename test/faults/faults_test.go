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

package faults_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/pizzaenv"
)

const (
	pizzaGroup = "restaurant.example.com"
	pizzaCRD   = pizzaenv.CRDName
	pizzaOld   = pizzaGroup + "/v1alpha1"
	pizzaNew   = pizzaGroup + "/v1beta1"
)

// target is what a scenario migrates: a CRD of its own whose objects are
// stored at version from; the policy asks for version to.
type target struct {
	crd, group, plural string
	from, to           string
}

func (t target) oldAPIVersion() string { return t.group + "/" + t.from }
func (t target) newAPIVersion() string { return t.group + "/" + t.to }

// population installs a scenario's target with size.objects objects stored
// at its from version, checked in etcd, and deletes it when the spec ends.
type population func(ctx context.Context) target

// pizzas is stage 2 of the Pizza CRD: v1alpha1 stored, v1beta1 served
// through the conversion webhook.
func pizzas(ctx context.Context) target {
	crd, err := pizzaenv.Stage(2)
	Expect(err).NotTo(HaveOccurred())
	webhook.PointConversionAt(crd)
	installCRD(ctx, crd)
	Expect(envtestutil.ForEach(size.objects, 16, func(i int) error {
		return k8sClient.Create(ctx, pizzaenv.SampleV1alpha1(i))
	})).To(Succeed())
	t := target{crd: crd.Name, group: pizzaGroup, plural: "pizzas", from: "v1alpha1", to: "v1beta1"}
	expectAllStoredAs(ctx, t.group, t.plural, t.oldAPIVersion(), size.objects)
	return t
}

// widgets is the widget CRD of a group of its own (envtestutil.WidgetCRD:
// v1 stored, v2 of the same schema served, no webhook).
func widgets(group string, statusSubresource bool) population {
	return func(ctx context.Context) target {
		crd := envtestutil.WidgetCRD(group, "v1", "v2")
		if statusSubresource {
			envtestutil.WithStatusSubresource(crd)
		}
		installCRD(ctx, crd)
		v1 := envtestutil.WidgetResource(group, "v1")
		Expect(envtestutil.CreateObjects(ctx, dyn, v1, size.objects, 16, func(i int) *unstructured.Unstructured {
			return envtestutil.Widget(v1, "default", fmt.Sprintf("widget-%05d", i), map[string]any{"color": "blue", "size": int64(i)})
		})).To(Succeed())
		t := target{crd: crd.Name, group: group, plural: "widgets", from: "v1", to: "v2"}
		expectAllStoredAs(ctx, t.group, t.plural, t.oldAPIVersion(), size.objects)
		return t
	}
}

// run is a scenario's migration: the figures, the target, the prune watcher
// and the manager.
type run struct {
	target
	f       *figures
	watcher *pruneWatcher
	phases  *phaseRecorder
	mgr     *managerProc
	// policyAt is when the policy was created.
	policyAt time.Time
}

// migrate starts the prune watcher of t and a manager (named manager in its
// log), and creates the policy asking for t.to with spec.
func migrate(ctx context.Context, f *figures, t target, manager string, spec graduatorv1alpha1.CRDVersionPolicySpec) *run {
	r := &run{target: t, f: f}
	r.watcher = startPruneWatcher(ctx, f, t.crd, t.group, t.plural, t.from)
	r.phases = startPhaseRecorder(ctx, t.crd)
	r.mgr = startManager(manager)
	spec.StorageVersion = t.to
	createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{ObjectMeta: metav1.ObjectMeta{Name: t.crd}, Spec: spec})
	r.policyAt = time.Now()
	return r
}

// expectHeldBack checks, polling every 250 ms for window, that
// storedVersions keeps the old version and the policy is not Ready; why ends
// the failure messages.
func (r *run) expectHeldBack(ctx context.Context, window time.Duration, why string) {
	Consistently(func(g Gomega) {
		if stored := crdStoredVersions(ctx, r.crd); stored != nil {
			g.Expect(stored).To(ContainElement(r.from), "storedVersions pruned "+why)
		}
		g.Expect(isReady(ctx, r.crd)).To(BeFalse(), "Ready "+why)
	}).WithTimeout(window).WithPolling(250 * time.Millisecond).Should(Succeed())
}

// expectFinished waits until the policy is Ready on its own and checks the
// end: no object left in the old version when storedVersions was pruned, and
// every object stored in the new one. faultEnd is when the last fault ended;
// with none (zero), the note says how long the policy took to be Ready.
func (r *run) expectFinished(ctx context.Context, faultEnd time.Time) {
	readyAt := waitReady(ctx, r.crd, 10*time.Minute)
	if faultEnd.IsZero() {
		r.f.Note = fmt.Sprintf("policy to Ready %s", readyAt.Sub(r.policyAt).Round(100*time.Millisecond))
	} else {
		r.f.FaultToReady = readyAt.Sub(faultEnd)
	}
	r.f.ManagerRestarts = r.mgr.restarts()
	r.watcher.expectPrunedClean(r.f)
	expectAllStoredAs(ctx, r.group, r.plural, r.newAPIVersion(), size.objects)
	r.phases.expectMonotonic()
}

// scenario is a row of the fault table.
type scenario struct {
	// figures names the scenario in the figures.
	figures    string
	population population
	// manager names the manager in its log.
	manager string
	spec    graduatorv1alpha1.CRDVersionPolicySpec
	// handledBeforeFault, when set, is how many objects the run must have
	// handled before the fault.
	handledBeforeFault int
	// fault, when set, brings the fault, checks what must hold while it
	// lasts, ends it and returns when it ended.
	fault func(ctx context.Context, r *run) time.Time
	// end checks the end; expectFinished when nil.
	end func(ctx context.Context, r *run, faultEnd time.Time)
}

var _ = Describe("Faults during a migration", func() {
	BeforeEach(func() {
		if apiServerBroken != "" {
			Skip("the API server could not be restarted earlier: " + apiServerBroken)
		}
	})

	It("1. survives SIGKILLs of the manager at random moments, losing no concurrent update", func(ctx SpecContext) {
		f := record("1 SIGKILL mid-run + concurrent writer")
		t := pizzas(ctx)

		By("a writer updating every 10th pizza with a counter, through both versions")
		var names []string
		for i := 0; i < size.objects; i += 10 {
			names = append(names, pizzaenv.SampleV1alpha1(i).Name)
		}
		w := startWriter(ctx, []schema.GroupVersionResource{pizzaenv.Resource("v1alpha1"), pizzaenv.Resource("v1beta1")},
			names, 40*time.Millisecond)
		r := migrate(ctx, f, t, "sigkill", policySpec(size.qps, size.pageSize))

		By(fmt.Sprintf("killing the manager with SIGKILL until %d kills landed mid-run", size.kills))
		// A page at the policy's QPS; each kill comes at a random moment
		// up to two pages after the restarted manager saved progress.
		page := time.Duration(float64(size.pageSize) / float64(size.qps) * float64(time.Second))
		var lastFault time.Time
		deadline := time.Now().Add(30 * time.Minute)
		for f.KillsMidRun < size.kills {
			Expect(time.Now()).To(BeTemporally("<", deadline), "kills did not land mid-run in time")
			base := handled(ctx, pizzaCRD)
			Eventually(func() (int64, error) {
				if isReady(ctx, pizzaCRD) {
					return 0, StopTrying(fmt.Sprintf("the migration finished after only %d of %d kills landed mid-run",
						f.KillsMidRun, size.kills))
				}
				return handled(ctx, pizzaCRD), nil
			}).WithTimeout(3 * time.Minute).WithPolling(50 * time.Millisecond).Should(BeNumerically(">", base))
			time.Sleep(time.Duration(rand.Int64N(int64(2 * page))))

			r.mgr.kill()
			lastFault = time.Now()
			f.Kills++
			if midRun(ctx) {
				f.KillsMidRun++
			}
			_, _ = fmt.Fprintf(GinkgoWriter, "kill %d (%d mid-run): %s\n", f.Kills, f.KillsMidRun,
				etcd.Summary(ctx, pizzaGroup, "pizzas"))
			if size.deleteStaleLease {
				deleteLease(ctx)
			}
			r.mgr.start()
		}

		By("the last manager finishing on its own")
		readyAt := waitReady(ctx, pizzaCRD, 15*time.Minute)
		f.FaultToReady = readyAt.Sub(lastFault)
		w.stop()
		f.Updates = w.updates.Load()
		f.ManagerRestarts = r.mgr.restarts()
		f.Note = fmt.Sprintf("writer errors %d", w.errors.Load())

		r.watcher.expectPrunedClean(f)
		r.phases.expectMonotonic()
		lost, examples := w.lost(ctx)
		f.UpdatesLost = lost
		Expect(lost).To(BeZero(), "writer updates lost: %v", examples)
		Expect(f.Updates).To(BeNumerically(">", 0), "the writer wrote")
		expectAllStoredAs(ctx, pizzaGroup, "pizzas", pizzaNew, size.objects)
		Expect(getPolicy(ctx, pizzaCRD).Status.Migration.Failed).To(BeZero())
	}, SpecTimeout(45*time.Minute))

	// The other scenarios share their shape: a population, a manager and a
	// policy; a fault once part of the objects are handled; the end.
	DescribeTable("a migration meeting a fault",
		func(ctx SpecContext, s scenario) {
			f := record(s.figures)
			r := migrate(ctx, f, s.population(ctx), s.manager, s.spec)
			if s.handledBeforeFault > 0 {
				waitMidRun(ctx, r.crd, int64(s.handledBeforeFault))
			}
			var faultEnd time.Time
			if s.fault != nil {
				faultEnd = s.fault(ctx, r)
			}
			if s.end == nil {
				r.expectFinished(ctx, faultEnd)
			} else {
				s.end(ctx, r, faultEnd)
			}
		},
		Entry("2. waits out a conversion webhook outage without pruning, and finishes on its own", SpecTimeout(30*time.Minute), scenario{
			figures:    fmt.Sprintf("2 conversion webhook down %s", size.webhookDown),
			population: pizzas, manager: "webhook", spec: policySpec(size.qps, size.pageSize),
			handledBeforeFault: size.objects / 5, fault: webhookOutage,
		}),
		Entry("3. finishes on its own after the API server restarts mid-run, losing nothing", SpecTimeout(30*time.Minute), scenario{
			figures:    "3 kube-apiserver restarted",
			population: widgets("apiserver.faults.graduator.io", false), manager: "apiserver", spec: policySpec(size.qps, size.pageSize),
			handledBeforeFault: size.objects / 5, fault: apiServerRestart, end: expectFinishedWithoutFailures,
		}),
		Entry("4. writes and prunes nothing while an admission policy denies updates, and finishes once it is removed", SpecTimeout(30*time.Minute), scenario{
			figures:    fmt.Sprintf("4 admission denies UPDATE for %s", size.denyHold),
			population: widgets("deny.faults.graduator.io", false), manager: "deny", spec: policySpec(size.qps, size.pageSize),
			handledBeforeFault: size.objects / 10, fault: updatesDenied,
		}),
		Entry("5a. writeTo: Status on a CRD without the status subresource prunes nothing and migrates nothing", SpecTimeout(15*time.Minute), scenario{
			figures:    "5a writeTo Status, no status subresource",
			population: widgets("nostatus.faults.graduator.io", false), manager: "nostatus", spec: writeToStatus(),
			end: expectNothingMigrated,
		}),
		Entry("5b. writeTo: Status on a CRD with the status subresource migrates every object and prunes", SpecTimeout(15*time.Minute), scenario{
			figures:    "5b writeTo Status, with status subresource",
			population: widgets("withstatus.faults.graduator.io", true), manager: "withstatus", spec: writeToStatus(),
		}),
		Entry("6. writes nothing once paused mid-run, and finishes when unpaused", SpecTimeout(30*time.Minute), scenario{
			figures:    fmt.Sprintf("6 paused mid-run, quiet %s", size.pauseQuiet),
			population: widgets(pauseGroup, false), manager: "pause", spec: policySpec(size.qps, size.pageSize),
			handledBeforeFault: size.objects / 5, fault: paused,
		}),
	)
})

// webhookOutage stops the conversion webhook for size.webhookDown.
func webhookOutage(ctx context.Context, r *run) time.Time {
	By("stopping the webhook mid-run")
	webhook.Stop()
	DeferCleanup(func(ctx context.Context) { Expect(webhook.Start(ctx)).To(Succeed()) })
	r.expectHeldBack(ctx, size.webhookDown, "while the webhook is down")
	Expect(crdStoredVersions(ctx, r.crd)).To(ContainElement(r.from))
	counts, _ := storedVersions(ctx, r.group, r.plural)
	Expect(counts[r.oldAPIVersion()]).To(BeNumerically(">", 0), "the outage came while objects were still to migrate")
	r.f.Note = fmt.Sprintf("%d objects still %s when the webhook came back", counts[r.oldAPIVersion()], r.from)

	By("starting the webhook again")
	Expect(webhook.Start(ctx)).To(Succeed())
	return time.Now()
}

// apiServerRestart stops and starts kube-apiserver; when envtest cannot
// start it again, the spec and those after it skip.
func apiServerRestart(_ context.Context, r *run) time.Time {
	By("stopping and starting kube-apiserver")
	apiServer := testEnv.ControlPlane.GetAPIServer()
	stopping := time.Now()
	stopErr := apiServer.Stop()
	stoppedAt := time.Now()
	if err := apiServer.Start(); err != nil {
		apiServerBroken = err.Error()
		Skip(fmt.Sprintf("envtest cannot restart kube-apiserver, so this scenario cannot run here: stop: %v; start: %v", stopErr, err))
	}
	upAt := time.Now()
	r.f.Note = fmt.Sprintf("graceful stop took %s, start %s", stoppedAt.Sub(stopping).Round(100*time.Millisecond),
		upAt.Sub(stoppedAt).Round(100*time.Millisecond))
	Expect(stopErr).NotTo(HaveOccurred(), "kube-apiserver stops gracefully")
	return upAt
}

// expectFinishedWithoutFailures is expectFinished, and no object failed.
func expectFinishedWithoutFailures(ctx context.Context, r *run, faultEnd time.Time) {
	r.expectFinished(ctx, faultEnd)
	Expect(getPolicy(ctx, r.crd).Status.Migration.Failed).To(BeZero())
}

// updatesDenied denies every UPDATE of the objects with a
// ValidatingAdmissionPolicy for size.denyHold, during which nothing may be
// written in etcd.
func updatesDenied(ctx context.Context, r *run) time.Time {
	By("a ValidatingAdmissionPolicy denying every UPDATE of " + r.plural)
	vap, binding := envtestutil.DenyUpdates("deny-updates."+r.group, r.group, r.plural, "false", "faults: every update is denied")
	Expect(k8sClient.Create(ctx, vap)).To(Succeed())
	Expect(k8sClient.Create(ctx, binding)).To(Succeed())
	removed := false
	remove := func(ctx context.Context) {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, binding))).To(Succeed())
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, vap))).To(Succeed())
	}
	DeferCleanup(func(ctx context.Context) {
		if !removed {
			remove(ctx)
		}
	})
	gvr := schema.GroupVersionResource{Group: r.group, Version: r.to, Resource: r.plural}
	Eventually(func() error {
		_, err := dyn.Resource(gvr).Namespace("default").Patch(ctx, "widget-00000", types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"probe":"x"}}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).
		Should(MatchError(ContainSubstring("faults: every update is denied")), "the admission policy is in force")
	// Requests admitted just before the policy took effect are done.
	time.Sleep(500 * time.Millisecond)
	before := modRevisions(ctx, r.group, r.plural)
	counts, _ := storedVersions(ctx, r.group, r.plural)
	Expect(counts[r.oldAPIVersion()]).To(BeNumerically(">", 0), "objects were still to migrate when the updates were denied")

	r.expectHeldBack(ctx, size.denyHold, "while updates are denied")
	changed, examples := changedSince(before, modRevisions(ctx, r.group, r.plural))
	Expect(changed).To(BeZero(), "objects written in etcd while every update was denied: %v", examples)
	after, _ := storedVersions(ctx, r.group, r.plural)
	Expect(after[r.oldAPIVersion()]).To(Equal(counts[r.oldAPIVersion()]), "objects still stored as %s", r.from)
	r.f.Note = fmt.Sprintf("%d objects still %s while denied; Ready reason %s", after[r.oldAPIVersion()], r.from, readyReason(ctx, r.crd))

	By("removing the admission policy")
	remove(ctx)
	removed = true
	return time.Now()
}

// writeToStatus is the spec of the writeTo: Status scenarios: 1000 writes/s
// in pages of 500.
func writeToStatus() graduatorv1alpha1.CRDVersionPolicySpec {
	spec := policySpec(1000, 500)
	spec.Migration.WriteTo = graduatorv1alpha1.WriteToStatus
	return spec
}

// expectNothingMigrated checks, for the length of a run over every object
// at 1000 writes/s and then some, that the policy holds back, that the
// watcher saw no prune, and that every object is still in the old version.
func expectNothingMigrated(ctx context.Context, r *run, _ time.Time) {
	window := max(12*time.Second, time.Duration(size.objects/1000)*time.Second+10*time.Second)
	r.expectHeldBack(ctx, window, "though no object could be rewritten")
	_, r.f.OldAtPrune = r.watcher.result()
	r.f.ManagerRestarts = r.mgr.restarts()
	r.f.Note = "Ready reason " + readyReason(ctx, r.crd)
	Expect(r.f.OldAtPrune).To(Equal(-1), "storedVersions was pruned")
	expectAllStoredAs(ctx, r.group, r.plural, r.oldAPIVersion(), size.objects)
}

// paused pauses the policy; from the moment it shows Paused, for
// size.pauseQuiet, the API server must receive no write from the manager.
func paused(ctx context.Context, r *run) time.Time {
	By("pausing the policy")
	setPaused(ctx, r.crd, true)
	Eventually(func() *metav1.Condition { return readyCondition(ctx, r.crd) }).
		WithTimeout(2 * time.Minute).WithPolling(50 * time.Millisecond).
		Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionFalse), HaveField("Reason", graduation.ReasonPaused)))
	pausedAt := time.Now()
	before := modRevisions(ctx, r.group, r.plural)
	time.Sleep(size.pauseQuiet)

	patches, err := managerPatches(r.group, r.plural, pausedAt)
	Expect(err).NotTo(HaveOccurred())
	all, err := managerPatches(r.group, r.plural, time.Time{})
	Expect(err).NotTo(HaveOccurred())
	Expect(len(all)).To(BeNumerically(">", len(patches)), "the audit log records the manager's PATCHes before the pause")
	changed, examples := changedSince(before, modRevisions(ctx, r.group, r.plural))
	r.f.Note = fmt.Sprintf("%d PATCHes before the pause, %d after Paused was shown; %d objects written in etcd after",
		len(all)-len(patches), len(patches), changed)
	Expect(patches).To(BeEmpty(), "PATCHes the API server received from the manager after Paused was shown")
	Expect(changed).To(BeZero(), "objects written in etcd after Paused was shown: %v", examples)
	counts, _ := storedVersions(ctx, r.group, r.plural)
	Expect(counts[r.oldAPIVersion()]).To(BeNumerically(">", 0), "the pause came while objects were still to migrate")

	By("unpausing")
	setPaused(ctx, r.crd, false)
	return time.Now()
}

// midRun reports whether the migration is running: the run started and is
// not complete, storedVersions still lists the old version and etcd still
// holds objects in it.
func midRun(ctx context.Context) bool {
	p := getPolicy(ctx, pizzaCRD)
	if p == nil || p.Status.Migration == nil || p.Status.Migration.CompletedAt != nil {
		return false
	}
	stored := crdStoredVersions(ctx, pizzaCRD)
	if len(stored) < 2 {
		return false
	}
	counts, _ := storedVersions(ctx, pizzaGroup, "pizzas")
	return counts[pizzaOld] > 0
}

func readyReason(ctx context.Context, name string) string {
	if c := readyCondition(ctx, name); c != nil {
		return fmt.Sprintf("%s=%s", c.Status, c.Reason)
	}
	return "unknown"
}

func setPaused(ctx context.Context, name string, paused bool) {
	patch := fmt.Appendf(nil, `{"spec":{"paused":%t}}`, paused)
	Eventually(func() error {
		return k8sClient.Patch(ctx, &graduatorv1alpha1.CRDVersionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}},
			client.RawPatch(types.MergePatchType, patch))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}
