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

package migration_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graduator/graduator/internal/enginehook"
	"github.com/graduator/graduator/internal/space"
	"github.com/graduator/graduator/migration"
	"github.com/graduator/graduator/snapshot"
	"github.com/graduator/graduator/test/envtestutil"
)

var _ = Describe("migration.Run", func() {
	It("rewrites every object in the new storage version, as etcd shows, without changing any content", func(ctx SpecContext) {
		const n = 400
		f := newFixture(ctx, n)
		Expect(f.storedCounts(ctx)).To(Equal(map[string]int{f.group + "/v1": n}), "before: every object stored as v1")
		f.switchStorage(ctx)
		Expect(f.storedCounts(ctx)).To(Equal(map[string]int{f.group + "/v1": n}), "switching storage rewrites nothing")

		before, err := snapshot.Take(ctx, dyn, f.v1)
		Expect(err).NotTo(HaveOccurred())
		Expect(before.Len()).To(Equal(n))

		var pages int
		result, err := migration.Run(ctx, dyn, migration.Options{
			Resource: f.v2, PageSize: 50, OnProgress: func(migration.Progress) { pages++ },
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(result.Complete).To(BeTrue())
		Expect(result.Listed).To(BeEquivalentTo(n))
		Expect(result.Rewritten).To(BeEquivalentTo(n))
		Expect(result.Failed).To(BeZero())
		Expect(pages).To(BeNumerically(">=", n/50), "progress is reported every page")

		Expect(f.storedCounts(ctx)).To(Equal(map[string]int{f.group + "/v2": n}), "after: every object stored as v2")
		Expect(before.Verify(ctx, dyn)).To(BeEmpty(), "no object's content changed")
	})

	It("skips objects written after the checkpoint without writing them again", func(ctx SpecContext) {
		f := newFixture(ctx, 60)
		f.switchStorage(ctx)
		first, err := migration.Run(ctx, dyn, migration.Options{Resource: f.v2})
		Expect(err).NotTo(HaveOccurred())
		Expect(first.Rewritten).To(BeEquivalentTo(60))

		second, err := migration.Run(ctx, dyn, migration.Options{Resource: f.v2, Resume: migration.Progress{Checkpoint: first.Checkpoint}})
		Expect(err).NotTo(HaveOccurred())
		Expect(second.Rewritten).To(BeZero())
		Expect(second.Skipped).To(BeEquivalentTo(60), "a repeated run is nearly free")
	})

	// Seed 17 of the robustness suite: a run retried after failures keeps
	// the first run's checkpoint and written ranges, but an object already
	// stored in the new version keeps its resourceVersion through a no-op
	// write, so it stays older than the checkpoint and was written again.
	It("skips, on a retry, the objects an earlier run's no-op writes proved stored in the new version", func(ctx SpecContext) {
		f := newFixture(ctx, 60)
		f.switchStorage(ctx)
		_, err := migration.Run(ctx, dyn, migration.Options{Resource: f.v2})
		Expect(err).NotTo(HaveOccurred())
		Expect(f.storedCounts(ctx)).To(Equal(map[string]int{f.group + "/v2": 60}))

		// Every object is stored as v2, older than this run's checkpoint:
		// its writes change no byte and no resourceVersion.
		noop, err := migration.Run(ctx, dyn, migration.Options{Resource: f.v2})
		Expect(err).NotTo(HaveOccurred())
		Expect(noop.Rewritten).To(BeEquivalentTo(60))
		Expect(noop.Written).NotTo(BeEmpty())

		retry, err := migration.Run(ctx, dyn, migration.Options{Resource: f.v2,
			Resume: migration.Progress{Checkpoint: noop.Checkpoint, Written: noop.Written}})
		Expect(err).NotTo(HaveOccurred())
		Expect(retry.Complete).To(BeTrue())
		Expect(retry.Rewritten).To(BeZero(), "the objects at a resourceVersion of the earlier run's writes are done")
		Expect(retry.Skipped).To(BeEquivalentTo(60))
	})

	It("skips objects deleted or updated during the run, losing none and reverting none", func(ctx SpecContext) {
		const n = 300
		f := newFixture(ctx, n)
		f.switchStorage(ctx)
		deleted, updated := map[string]bool{}, map[string]bool{}
		var once sync.Once
		result, err := migration.Run(ctx, dyn, migration.Options{
			Resource: f.v2, PageSize: 30, Concurrency: 4,
			OnProgress: func(migration.Progress) {
				once.Do(func() {
					// Objects of later pages change under the run.
					for i := 200; i < 220; i++ {
						ns, name := key(i)
						Expect(dyn.Resource(f.v1).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
						deleted[ns+"/"+name] = true
					}
					for i := 250; i < 270; i++ {
						ns, name := key(i)
						_, err := dyn.Resource(f.v1).Namespace(ns).Patch(ctx, name, types.MergePatchType,
							[]byte(`{"spec":{"color":"red"}}`), metav1.PatchOptions{})
						Expect(err).NotTo(HaveOccurred())
						updated[ns+"/"+name] = true
					}
				})
			},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(result.Complete).To(BeTrue())
		Expect(result.Failed).To(BeZero())
		// A paginated LIST is one consistent snapshot: deleted objects are
		// still listed, and their writes find them gone.
		Expect(result.Listed).To(BeEquivalentTo(n))
		Expect(result.Rewritten + result.Skipped).To(Equal(result.Listed))
		Expect(result.Skipped).To(BeNumerically(">=", 40), "deleted and updated objects are skipped")

		stored := f.stored(ctx)
		Expect(stored).To(HaveLen(n-20), "no deleted object came back, no object was lost")
		for k := range deleted {
			Expect(stored).NotTo(HaveKey(k))
		}
		Expect(stored).To(HaveEach(f.group+"/v2"), "every remaining object is stored as v2")
		for k := range updated {
			ns, name := splitKey(k)
			obj, err := dyn.Resource(f.v2).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(obj.Object["spec"]).To(HaveKeyWithValue("color", "red"), "the concurrent update is kept: %s", k)
		}
	})

	It("goes on from the next key when the continue token expires, and finishes", func(ctx SpecContext) {
		const n = 200
		f := newFixture(ctx, n)
		f.switchStorage(ctx)
		var compacted sync.Once
		result, err := migration.Run(ctx, dyn, migration.Options{
			Resource: f.v2, PageSize: 20, Concurrency: 2,
			OnProgress: func(migration.Progress) {
				compacted.Do(func() {
					// Compacting etcd past the listing's snapshot expires its
					// continue token: the next page gets 410 Gone.
					resp, err := etcd.Client().Get(ctx, "compact-probe")
					Expect(err).NotTo(HaveOccurred())
					_, err = etcd.Client().Compact(ctx, resp.Header.Revision)
					Expect(err).NotTo(HaveOccurred())
				})
			},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(result.Complete).To(BeTrue())
		Expect(result.Failed).To(BeZero())
		// The 410 carries the API server's inconsistent continue token: the
		// listing goes on from the next key, so no object is listed twice
		// (restarting from the beginning listed the done pages again).
		Expect(result.Listed).To(BeEquivalentTo(n), "every object listed once")
		Expect(result.Rewritten).To(BeEquivalentTo(n))
		Expect(f.storedCounts(ctx)).To(Equal(map[string]int{f.group + "/v2": n}))
	})

	It("records an object the API server rejects, finishes the rest, and pruning is refused", func(ctx SpecContext) {
		const n = 100
		f := newFixture(ctx, n)
		rejected := []int{7, 42, 77}
		for _, i := range rejected {
			ns, name := key(i)
			_, err := dyn.Resource(f.v1).Namespace(ns).Patch(ctx, name, types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"frozen":"true"}}}`), metav1.PatchOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		denyUpdatesOfFrozen(ctx, f, rejected[0])
		f.switchStorage(ctx)

		result, err := migration.Run(ctx, dyn, migration.Options{Resource: f.v2, PageSize: 25})
		Expect(err).NotTo(HaveOccurred())
		Expect(result.Complete).To(BeTrue(), "the run finishes the rest")
		Expect(result.Failed).To(BeEquivalentTo(len(rejected)))
		Expect(result.Rewritten).To(BeEquivalentTo(n - len(rejected)))
		Expect(result.Failures).To(HaveLen(len(rejected)))
		for _, failure := range result.Failures {
			Expect(failure.Reason).To(ContainSubstring("frozen widgets cannot be updated"))
		}
		stored := f.stored(ctx)
		for _, i := range rejected {
			ns, name := key(i)
			Expect(stored).To(HaveKeyWithValue(ns+"/"+name, f.group+"/v1"), "the rejected object stays as it was")
		}

		var crd apiextensionsv1.CustomResourceDefinition
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(f.crd), &crd)).To(Succeed())
		err = migration.PruneStoredVersions(ctx, k8sClient, crd.Name, migration.Expectation{
			StorageVersion: "v2", Generation: crd.Generation, Complete: result.Complete, Failed: result.Failed,
		})
		Expect(err).To(MatchError(migration.ErrIncompleteRun))
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(f.crd), &crd)).To(Succeed())
		Expect(crd.Status.StoredVersions).To(ConsistOf("v1", "v2"), "storedVersions is not pruned")
	})

	It("refuses to prune when the CRD changed during the run, and prunes a clean run", func(ctx SpecContext) {
		f := newFixture(ctx, 80)
		f.switchStorage(ctx)
		var crd apiextensionsv1.CustomResourceDefinition
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(f.crd), &crd)).To(Succeed())
		startedOn := crd.Generation

		var changed sync.Once
		result, err := migration.Run(ctx, dyn, migration.Options{
			Resource: f.v2, PageSize: 20,
			OnProgress: func(migration.Progress) {
				changed.Do(func() {
					var live apiextensionsv1.CustomResourceDefinition
					Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(f.crd), &live)).To(Succeed())
					live.Spec.Versions[1].Schema.OpenAPIV3Schema.Description = "changed mid-run"
					Expect(k8sClient.Update(ctx, &live)).To(Succeed())
				})
			},
		})
		Expect(err).NotTo(HaveOccurred())
		expect := migration.Expectation{StorageVersion: "v2", Generation: startedOn, Complete: result.Complete, Failed: result.Failed}
		Expect(migration.PruneStoredVersions(ctx, k8sClient, crd.Name, expect)).To(MatchError(migration.ErrCRDChanged))
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(f.crd), &crd)).To(Succeed())
		Expect(crd.Status.StoredVersions).To(ConsistOf("v1", "v2"))

		By("running again on the current generation, pruning succeeds")
		again, err := migration.Run(ctx, dyn, migration.Options{Resource: f.v2})
		Expect(err).NotTo(HaveOccurred())
		Expect(migration.PruneStoredVersions(ctx, k8sClient, crd.Name, migration.Expectation{
			StorageVersion: "v2", Generation: crd.Generation, Complete: again.Complete, Failed: again.Failed,
		})).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(f.crd), &crd)).To(Succeed())
		Expect(crd.Status.StoredVersions).To(Equal([]string{"v2"}))
	})

	It("stops on cancellation and resumes from the saved continue token", func(ctx SpecContext) {
		const n = 200
		f := newFixture(ctx, n)
		f.switchStorage(ctx)
		runCtx, cancel := context.WithCancel(ctx)
		var saved migration.Progress
		pages := 0
		first, err := migration.Run(runCtx, dyn, migration.Options{
			Resource: f.v2, PageSize: 20, Concurrency: 2,
			OnProgress: func(p migration.Progress) {
				saved = p
				if pages++; pages == 3 {
					cancel()
				}
			},
		})
		Expect(err).To(MatchError(context.Canceled))
		Expect(first.Complete).To(BeFalse())
		Expect(first.Continue).To(Equal(saved.Continue), "the result is the last saved progress")
		Expect(saved.Continue).NotTo(BeEmpty())
		// Writers flow across pages; progress only ever covers whole pages
		// whose every object is done.
		Expect(saved.Listed).To(BeNumerically(">=", 60))
		Expect(saved.Listed).To(BeNumerically("<", n))
		Expect(saved.Listed%20).To(BeZero(), "only whole pages are counted")
		Expect(saved.Rewritten+saved.Skipped).To(Equal(saved.Listed), "every object of a counted page is done")

		recorder := &listRecorder{}
		resumedClient, err := dynamic.NewForConfig(recorder.config())
		Expect(err).NotTo(HaveOccurred())
		second, err := migration.Run(ctx, resumedClient, migration.Options{Resource: f.v2, PageSize: 20, Resume: saved})
		Expect(err).NotTo(HaveOccurred())
		Expect(recorder.continueTokens()).NotTo(BeEmpty())
		Expect(recorder.continueTokens()[0]).To(Equal(saved.Continue), "the first LIST continues from the saved token")
		Expect(second.Complete).To(BeTrue())
		Expect(second.Listed).To(BeEquivalentTo(n), "every object listed once over both runs")
		Expect(second.Rewritten + second.Skipped).To(BeEquivalentTo(n))
		Expect(f.storedCounts(ctx)).To(Equal(map[string]int{f.group + "/v2": n}))
	})

	It("cleans managedFields entries of versions no longer served", func(ctx SpecContext) {
		f := newFixture(ctx, 20)
		f.switchStorage(ctx)
		run, err := migration.Run(ctx, dyn, migration.Options{Resource: f.v2, Config: cfg})
		Expect(err).NotTo(HaveOccurred())

		// The cleanup follows the run under the same space budget: each of
		// its PATCHes is charged (as the cleanup's), and its budget says it
		// follows the run's writes.
		counting := rest.CopyConfig(cfg)
		var patches atomic.Int64
		counting.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripper(func(req *http.Request) (*http.Response, error) {
				if req.Method == http.MethodPatch {
					patches.Add(1)
				}
				return rt.RoundTrip(req)
			})
		})
		counted, err := dynamic.NewForConfig(counting)
		Expect(err).NotTo(HaveOccurred())
		var charged map[space.Writer]space.Charge
		res, err := migration.CleanupManagedFieldsWithin(enginehook.With(ctx, enginehook.Hook{OnCharged: func(c map[space.Writer]space.Charge) { charged = c }}), counted, f.v2, []string{"v2"},
			migration.CleanupOptions{Config: cfg, Previous: run.Space})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Cleaned).To(Equal(20))
		Expect(charged[space.WriterCleanup].Writes).To(Equal(patches.Load()), "every PATCH of the cleanup charged to the budget")
		Expect(res.SpaceBudget).To(BeNumerically(">", 0), "%s", res.SpaceBudgetReason)
		Expect(res.Space.Peak).To(BeNumerically(">=", run.Space.Peak), "the ledger carried from the run")
		list, err := dyn.Resource(f.v2).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		for _, item := range list.Items {
			for _, mf := range item.GetManagedFields() {
				Expect(mf.APIVersion).NotTo(Equal(f.group+"/v1"), item.GetName())
			}
		}
	})
})

// key returns the namespace and name fixture.create gave object i.
func key(i int) (string, string) {
	return []string{"default", "kube-public"}[i%2], fmt.Sprintf("w-%05d", i)
}

func splitKey(k string) (string, string) {
	for i := range k {
		if k[i] == '/' {
			return k[:i], k[i+1:]
		}
	}
	return "", k
}

// denyUpdatesOfFrozen installs a ValidatingAdmissionPolicy that rejects every
// update of a widget labelled frozen=true, even one that changes nothing, and
// waits until it rejects object number frozen.
func denyUpdatesOfFrozen(ctx context.Context, f *fixture, frozen int) {
	policy, binding := envtestutil.DenyUpdates("freeze-"+f.group, f.group, "widgets",
		"!has(object.metadata.labels) || !('frozen' in object.metadata.labels)", "frozen widgets cannot be updated")
	Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	Expect(k8sClient.Create(ctx, binding)).To(Succeed())
	// The policy takes effect once the API server loaded it.
	ns, name := key(frozen)
	Eventually(func() bool {
		_, err := dyn.Resource(f.v1).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(`{}`),
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err)
	}).WithTimeout(30*time.Second).Should(BeTrue(), "the admission policy rejects updates of frozen widgets")
}
