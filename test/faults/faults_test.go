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
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/graduation"
	"github.com/graduator/graduator/test/pizzaenv"
)

const (
	pizzaGroup = "restaurant.example.com"
	pizzaCRD   = pizzaenv.CRDName
	pizzaOld   = pizzaGroup + "/v1alpha1"
	pizzaNew   = pizzaGroup + "/v1beta1"
)

// installPizzas installs stage 2 of the Pizza CRD (v1alpha1 stored, v1beta1
// served through the conversion webhook), creates n pizzas at v1alpha1, and
// deletes the CRD when the spec ends.
func installPizzas(ctx context.Context, n int) {
	crd, err := pizzaenv.Stage(2)
	Expect(err).NotTo(HaveOccurred())
	webhook.PointConversionAt(crd)
	Expect(k8sClient.Create(ctx, crd)).To(Succeed())
	DeferCleanup(deleteCRD, crd.Name)
	Expect(pizzaenv.WaitServed(ctx, k8sClient, dyn, crd.Name)).To(Succeed())
	createInParallel(ctx, n, func(ctx context.Context, i int) error {
		return k8sClient.Create(ctx, pizzaenv.SampleV1alpha1(i))
	})
	expectAllStoredAs(ctx, pizzaGroup, "pizzas", pizzaOld, n)
}

// installWidgets installs a widget CRD of its own group with n widgets at
// v1, deleted when the spec ends.
func installWidgets(ctx context.Context, group string, statusSubresource bool, n int) string {
	crd := widgetCRD(group, statusSubresource)
	installCRD(ctx, crd)
	createWidgets(ctx, group, n)
	expectAllStoredAs(ctx, group, "widgets", group+"/v1", n)
	return crd.Name
}

var _ = Describe("Faults during a migration", func() {
	BeforeEach(func() {
		if apiServerBroken != "" {
			Skip("the API server could not be restarted earlier: " + apiServerBroken)
		}
	})

	It("1. survives SIGKILLs of the manager at random moments, losing no concurrent update", func(ctx SpecContext) {
		f := record("1 SIGKILL mid-run + concurrent writer")
		installPizzas(ctx, size.objects)

		By("a writer updating every 10th pizza with a counter, through both versions")
		var names []string
		for i := 0; i < size.objects; i += 10 {
			names = append(names, pizzaenv.SampleV1alpha1(i).Name)
		}
		w := startWriter(ctx, []schema.GroupVersionResource{pizzaenv.Resource("v1alpha1"), pizzaenv.Resource("v1beta1")},
			names, 40*time.Millisecond)
		watcher := startPruneWatcher(ctx, f, pizzaCRD, pizzaGroup, "pizzas", "v1alpha1")
		mgr := startManager("sigkill")
		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: pizzaCRD},
			Spec:       policySpec("v1beta1", size.qps, size.pageSize),
		})

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

			mgr.kill()
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
			mgr.start()
		}

		By("the last manager finishing on its own")
		readyAt := waitReady(ctx, pizzaCRD, 15*time.Minute)
		f.FaultToReady = readyAt.Sub(lastFault)
		w.stop()
		f.Updates = w.updates.Load()
		f.ManagerRestarts = mgr.restarts()
		f.Note = fmt.Sprintf("writer errors %d", w.errors.Load())

		watcher.expectPrunedClean(f)
		lost, examples := w.lost(ctx)
		f.UpdatesLost = lost
		Expect(lost).To(BeZero(), "writer updates lost: %v", examples)
		Expect(f.Updates).To(BeNumerically(">", 0), "the writer wrote")
		expectAllStoredAs(ctx, pizzaGroup, "pizzas", pizzaNew, size.objects)
		Expect(getPolicy(ctx, pizzaCRD).Status.Migration.Failed).To(BeZero())
	}, SpecTimeout(45*time.Minute))

	It("2. waits out a conversion webhook outage without pruning, and finishes on its own", func(ctx SpecContext) {
		f := record(fmt.Sprintf("2 conversion webhook down %s", size.webhookDown))
		installPizzas(ctx, size.objects)
		watcher := startPruneWatcher(ctx, f, pizzaCRD, pizzaGroup, "pizzas", "v1alpha1")
		mgr := startManager("webhook")
		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: pizzaCRD},
			Spec:       policySpec("v1beta1", size.qps, size.pageSize),
		})
		waitMidRun(ctx, pizzaCRD, int64(size.objects/5))

		By("stopping the webhook mid-run")
		webhook.Stop()
		DeferCleanup(func(ctx context.Context) { Expect(webhook.Start(ctx)).To(Succeed()) })
		Consistently(func(g Gomega) {
			if stored := crdStoredVersions(ctx, pizzaCRD); stored != nil {
				g.Expect(stored).To(ContainElement("v1alpha1"), "storedVersions pruned while the webhook is down")
			}
			g.Expect(isReady(ctx, pizzaCRD)).To(BeFalse(), "Ready while the webhook is down")
		}).WithTimeout(size.webhookDown).WithPolling(250 * time.Millisecond).Should(Succeed())
		Expect(crdStoredVersions(ctx, pizzaCRD)).To(ContainElement("v1alpha1"))
		counts, _ := storedVersions(ctx, pizzaGroup, "pizzas")
		Expect(counts[pizzaOld]).To(BeNumerically(">", 0), "the outage came while objects were still to migrate")
		f.Note = fmt.Sprintf("%d objects still v1alpha1 when the webhook came back", counts[pizzaOld])

		By("starting the webhook again")
		Expect(webhook.Start(ctx)).To(Succeed())
		upAt := time.Now()
		readyAt := waitReady(ctx, pizzaCRD, 10*time.Minute)
		f.FaultToReady = readyAt.Sub(upAt)
		f.ManagerRestarts = mgr.restarts()

		watcher.expectPrunedClean(f)
		expectAllStoredAs(ctx, pizzaGroup, "pizzas", pizzaNew, size.objects)
	}, SpecTimeout(30*time.Minute))

	It("3. finishes on its own after the API server restarts mid-run, losing nothing", func(ctx SpecContext) {
		f := record("3 kube-apiserver restarted")
		const group = "apiserver.faults.graduator.io"
		crdName := installWidgets(ctx, group, false, size.objects)
		watcher := startPruneWatcher(ctx, f, crdName, group, "widgets", "v1")
		mgr := startManager("apiserver")
		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: crdName},
			Spec:       policySpec("v2", size.qps, size.pageSize),
		})
		waitMidRun(ctx, crdName, int64(size.objects/5))

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
		f.Note = fmt.Sprintf("graceful stop took %s, start %s", stoppedAt.Sub(stopping).Round(100*time.Millisecond),
			upAt.Sub(stoppedAt).Round(100*time.Millisecond))
		Expect(stopErr).NotTo(HaveOccurred(), "kube-apiserver stops gracefully")

		readyAt := waitReady(ctx, crdName, 10*time.Minute)
		f.FaultToReady = readyAt.Sub(upAt)
		f.ManagerRestarts = mgr.restarts()
		watcher.expectPrunedClean(f)
		expectAllStoredAs(ctx, group, "widgets", group+"/v2", size.objects)
		Expect(getPolicy(ctx, crdName).Status.Migration.Failed).To(BeZero())
	}, SpecTimeout(30*time.Minute))

	It("4. writes and prunes nothing while an admission policy denies updates, and finishes once it is removed", func(ctx SpecContext) {
		f := record(fmt.Sprintf("4 admission denies UPDATE for %s", size.denyHold))
		const group = "deny.faults.graduator.io"
		crdName := installWidgets(ctx, group, false, size.objects)
		watcher := startPruneWatcher(ctx, f, crdName, group, "widgets", "v1")
		mgr := startManager("deny")
		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: crdName},
			Spec:       policySpec("v2", size.qps, size.pageSize),
		})
		waitMidRun(ctx, crdName, int64(size.objects/10))

		By("a ValidatingAdmissionPolicy denying every UPDATE of widgets")
		vap, binding := denyUpdates(group, "widgets")
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
		gvr := schema.GroupVersionResource{Group: group, Version: "v2", Resource: "widgets"}
		Eventually(func() error {
			_, err := dyn.Resource(gvr).Namespace("default").Patch(ctx, "widget-00000", types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"probe":"x"}}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).
			Should(MatchError(ContainSubstring("faults: every update is denied")), "the admission policy is in force")
		// Requests admitted just before the policy took effect are done.
		time.Sleep(500 * time.Millisecond)
		before := modRevisions(ctx, group, "widgets")
		counts, _ := storedVersions(ctx, group, "widgets")
		Expect(counts[group+"/v1"]).To(BeNumerically(">", 0), "objects were still to migrate when the updates were denied")

		Consistently(func(g Gomega) {
			if stored := crdStoredVersions(ctx, crdName); stored != nil {
				g.Expect(stored).To(ContainElement("v1"), "storedVersions pruned while updates are denied")
			}
			g.Expect(isReady(ctx, crdName)).To(BeFalse(), "Ready while updates are denied")
		}).WithTimeout(size.denyHold).WithPolling(250 * time.Millisecond).Should(Succeed())
		changed, examples := changedSince(before, modRevisions(ctx, group, "widgets"))
		Expect(changed).To(BeZero(), "objects written in etcd while every update was denied: %v", examples)
		after, _ := storedVersions(ctx, group, "widgets")
		Expect(after[group+"/v1"]).To(Equal(counts[group+"/v1"]), "objects still stored as v1")
		f.Note = fmt.Sprintf("%d objects still v1 while denied; Ready reason %s", after[group+"/v1"], readyReason(ctx, crdName))

		By("removing the admission policy")
		remove(ctx)
		removed = true
		removedAt := time.Now()
		readyAt := waitReady(ctx, crdName, 10*time.Minute)
		f.FaultToReady = readyAt.Sub(removedAt)
		f.ManagerRestarts = mgr.restarts()
		watcher.expectPrunedClean(f)
		expectAllStoredAs(ctx, group, "widgets", group+"/v2", size.objects)
	}, SpecTimeout(30*time.Minute))

	Describe("5. writeTo: Status", func() {
		It("5a. on a CRD without the status subresource prunes nothing and migrates nothing", func(ctx SpecContext) {
			f := record("5a writeTo Status, no status subresource")
			const group = "nostatus.faults.graduator.io"
			crdName := installWidgets(ctx, group, false, size.objects)
			watcher := startPruneWatcher(ctx, f, crdName, group, "widgets", "v1")
			mgr := startManager("nostatus")
			spec := policySpec("v2", 1000, 500)
			spec.Migration.WriteTo = graduatorv1alpha1.WriteToStatus
			createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{ObjectMeta: metav1.ObjectMeta{Name: crdName}, Spec: spec})

			// Long enough for a run over every object at 1000 writes/s, and
			// then some.
			window := max(12*time.Second, time.Duration(size.objects/1000)*time.Second+10*time.Second)
			Consistently(func(g Gomega) {
				if stored := crdStoredVersions(ctx, crdName); stored != nil {
					g.Expect(stored).To(ContainElement("v1"), "storedVersions pruned though no object could be rewritten")
				}
				g.Expect(isReady(ctx, crdName)).To(BeFalse(), "Ready though no object could be rewritten")
			}).WithTimeout(window).WithPolling(250 * time.Millisecond).Should(Succeed())
			_, f.OldAtPrune = watcher.result()
			f.ManagerRestarts = mgr.restarts()
			f.Note = "Ready reason " + readyReason(ctx, crdName)
			Expect(f.OldAtPrune).To(Equal(-1), "storedVersions was pruned")
			expectAllStoredAs(ctx, group, "widgets", group+"/v1", size.objects)
		}, SpecTimeout(15*time.Minute))

		It("5b. on a CRD with the status subresource migrates every object and prunes", func(ctx SpecContext) {
			f := record("5b writeTo Status, with status subresource")
			const group = "withstatus.faults.graduator.io"
			crdName := installWidgets(ctx, group, true, size.objects)
			watcher := startPruneWatcher(ctx, f, crdName, group, "widgets", "v1")
			mgr := startManager("withstatus")
			spec := policySpec("v2", 1000, 500)
			spec.Migration.WriteTo = graduatorv1alpha1.WriteToStatus
			createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{ObjectMeta: metav1.ObjectMeta{Name: crdName}, Spec: spec})
			start := time.Now()
			waitReady(ctx, crdName, 10*time.Minute)
			f.Note = fmt.Sprintf("policy to Ready %s", time.Since(start).Round(100*time.Millisecond))
			f.ManagerRestarts = mgr.restarts()
			watcher.expectPrunedClean(f)
			expectAllStoredAs(ctx, group, "widgets", group+"/v2", size.objects)
		}, SpecTimeout(15*time.Minute))
	})

	It("6. writes nothing once paused mid-run, and finishes when unpaused", func(ctx SpecContext) {
		f := record(fmt.Sprintf("6 paused mid-run, quiet %s", size.pauseQuiet))
		const group = pauseGroup
		crdName := installWidgets(ctx, group, false, size.objects)
		watcher := startPruneWatcher(ctx, f, crdName, group, "widgets", "v1")
		mgr := startManager("pause")
		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: crdName},
			Spec:       policySpec("v2", size.qps, size.pageSize),
		})
		waitMidRun(ctx, crdName, int64(size.objects/5))

		By("pausing the policy")
		setPaused(ctx, crdName, true)
		Eventually(func() *metav1.Condition { return readyCondition(ctx, crdName) }).
			WithTimeout(2 * time.Minute).WithPolling(50 * time.Millisecond).
			Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionFalse), HaveField("Reason", graduation.ReasonPaused)))
		pausedAt := time.Now()
		before := modRevisions(ctx, group, "widgets")
		time.Sleep(size.pauseQuiet)

		patches, err := managerPatches(group, "widgets", pausedAt)
		Expect(err).NotTo(HaveOccurred())
		all, err := managerPatches(group, "widgets", time.Time{})
		Expect(err).NotTo(HaveOccurred())
		Expect(len(all)).To(BeNumerically(">", len(patches)), "the audit log records the manager's PATCHes before the pause")
		changed, examples := changedSince(before, modRevisions(ctx, group, "widgets"))
		f.Note = fmt.Sprintf("%d PATCHes before the pause, %d after Paused was shown; %d objects written in etcd after",
			len(all)-len(patches), len(patches), changed)
		Expect(patches).To(BeEmpty(), "PATCHes the API server received from the manager after Paused was shown")
		Expect(changed).To(BeZero(), "objects written in etcd after Paused was shown: %v", examples)
		counts, _ := storedVersions(ctx, group, "widgets")
		Expect(counts[group+"/v1"]).To(BeNumerically(">", 0), "the pause came while objects were still to migrate")

		By("unpausing")
		setPaused(ctx, crdName, false)
		unpausedAt := time.Now()
		readyAt := waitReady(ctx, crdName, 10*time.Minute)
		f.FaultToReady = readyAt.Sub(unpausedAt)
		f.ManagerRestarts = mgr.restarts()
		watcher.expectPrunedClean(f)
		expectAllStoredAs(ctx, group, "widgets", group+"/v2", size.objects)
	}, SpecTimeout(30*time.Minute))
})

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

// denyUpdates is a ValidatingAdmissionPolicy, and its binding, that deny
// every UPDATE (PATCH included) of the resource.
func denyUpdates(group, resource string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	name := "deny-updates." + group
	fail := admissionregistrationv1.Fail
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{
							APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource},
						},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "faults: every update is denied"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	return vap, binding
}
