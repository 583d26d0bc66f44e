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
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graduator/graduator/migration"
	"github.com/graduator/graduator/test/envtestutil"
)

var _ = Describe("The invariant: nothing counts as migrated unless the API server said so", func() {
	It("counts writes to a status subresource the version does not have as failed, never as done, and pruning is refused", func(ctx SpecContext) {
		const n = 40
		group := fmt.Sprintf("m%d.migration.test.graduator.io", groups.Add(1))
		crd := envtestutil.WidgetCRD(group, "v1", "v2") // no status subresource
		Expect(k8sClient.Create(ctx, crd)).To(Succeed())
		Eventually(func() error { return envtestutil.Served(ctx, dyn, crd) }).WithTimeout(30 * time.Second).Should(Succeed())
		v1, v2 := envtestutil.WidgetResource(group, "v1"), envtestutil.WidgetResource(group, "v2")
		Expect(envtestutil.CreateObjects(ctx, dyn, v1, n, 4, func(i int) *unstructured.Unstructured {
			return envtestutil.Widget(v1, "default", fmt.Sprintf("w-%03d", i), map[string]any{"color": "blue"})
		})).To(Succeed())
		Expect(envtestutil.SetStorageVersion(ctx, k8sClient, crd.Name, "v2")).To(Succeed())

		result, err := migration.Run(ctx, dyn, migration.Options{Resource: v2, WriteTo: migration.WriteToStatus, PageSize: 15})
		Expect(err).NotTo(HaveOccurred())
		Expect(result.Complete).To(BeTrue())
		Expect(result.Rewritten).To(BeZero())
		Expect(result.Skipped).To(BeZero(), "a 404 from /status is not a deleted object")
		Expect(result.Failed).To(BeEquivalentTo(n))
		Expect(result.Failures[0].Reason).To(ContainSubstring("still exists unchanged"))

		var live apiextensionsv1.CustomResourceDefinition
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(crd), &live)).To(Succeed())
		Expect(migration.PruneStoredVersions(ctx, k8sClient, crd.Name, migration.Expectation{
			StorageVersion: "v2", Generation: live.Generation, Complete: result.Complete, Failed: result.Failed,
		})).To(MatchError(migration.ErrIncompleteRun))
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(crd), &live)).To(Succeed())
		Expect(live.Status.StoredVersions).To(ConsistOf("v1", "v2"))
		counts, err := etcd.Counts(ctx, group, "widgets")
		Expect(err).NotTo(HaveOccurred())
		Expect(counts).To(Equal(map[string]int{group + "/v1": n}), "etcd holds every object at v1")
	})

	It("catches up objects an API server wrote in the old version while the run went on, from its watch, without listing them again", func(ctx SpecContext) {
		const n, pageSize = 400, 50
		f := newFixture(ctx, n)
		f.switchStorage(ctx)
		var lists envtestutil.ListRecorder
		recorded, err := dynamic.NewForConfig(lists.Config(cfg))
		Expect(err).NotTo(HaveOccurred())
		var late map[string]bool
		var once sync.Once
		result, err := migration.Run(ctx, recorded, migration.Options{
			Resource: f.v2, PageSize: pageSize, Concurrency: 2,
			OnProgress: func(migration.Progress) {
				// An API server of an HA control plane that still takes v1
				// for the storage version writes objects of a later page.
				once.Do(func() { late = f.writeInOldVersion(ctx, 361, 400) })
			},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(result.Complete).To(BeTrue())
		Expect(result.Failed).To(BeZero())
		Expect(late).To(HaveLen(20))
		Expect(f.storedCounts(ctx)).To(Equal(map[string]int{f.group + "/v2": n}), "etcd holds every object at v2")
		Expect(result.CaughtUp).To(BeNumerically(">=", len(late)), "the sweep rewrote the objects written late")
		Expect(result.CaughtUp).To(BeNumerically("<", n/4), "and only those: the run's own writes are not written again")

		Expect(result.SweepMode).To(Equal(migration.SweepWatch), result.SweepReason)
		Expect(result.SweepReason).To(ContainSubstring("the watch from the checkpoint saw every write"))
		listings, reads := 0, 0
		for _, call := range lists.Of("widgets") {
			if call.Exact {
				continue // the space budget asking whether etcd compacted past a revision
			}
			reads++
			if !strings.Contains(call.Path, "/namespaces/") && call.Continue == "" {
				listings++
			}
		}
		Expect(listings).To(Equal(1), "the population is listed once, by the main pass: %v", lists.Of("widgets"))
		Expect(reads).To(BeNumerically("<=", n/pageSize+2), "a page each, and one empty read of the current revision")
	})

	It("backs off when the API server throttles: the writer limit and the request rate drop, and every object is done", func(ctx SpecContext) {
		const n = 600
		f := newFixture(ctx, n)
		f.switchStorage(ctx)
		var throttling atomic.Bool
		var patches, throttled atomic.Int64
		throttledCfg := rest.CopyConfig(cfg)
		throttledCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripper(func(req *http.Request) (*http.Response, error) {
				if req.Method != http.MethodPatch {
					return rt.RoundTrip(req)
				}
				patches.Add(1)
				if throttling.Load() {
					throttled.Add(1)
					// What API Priority and Fairness answers a client over its share.
					return &http.Response{StatusCode: http.StatusTooManyRequests, Request: req,
						Header: http.Header{"Retry-After": []string{"1"}, "Content-Type": []string{"application/json"}},
						Body: io.NopCloser(strings.NewReader(`{"kind":"Status","apiVersion":"v1","status":"Failure",` +
							`"message":"too many requests","reason":"TooManyRequests","code":429}`))}, nil
				}
				return rt.RoundTrip(req)
			})
		}

		var (
			mu            sync.Mutex
			before, after []int // the writer limit reported before and after the throttling began
		)
		result, err := migration.Run(ctx, dyn, migration.Options{
			Resource: f.v2, PageSize: 50, Config: throttledCfg,
			OnProgress: func(p migration.Progress) {
				mu.Lock()
				defer mu.Unlock()
				if after != nil {
					after = append(after, p.Writers)
					return
				}
				before = append(before, p.Writers)
				if p.Listed >= 150 {
					throttling.Store(true)
					time.AfterFunc(3*time.Second, func() { throttling.Store(false) })
					after = []int{}
				}
			},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(result.Complete).To(BeTrue())
		Expect(result.Failed).To(BeZero())
		Expect(f.storedCounts(ctx)).To(Equal(map[string]int{f.group + "/v2": n}))

		Expect(before).NotTo(BeEmpty())
		// The limit starts at 8 writers and, once a pause has found the
		// server idle, climbs towards the bound: above 4 either way.
		Expect(slices.Max(before)).To(BeNumerically(">", 4), "the limit is up while the server keeps up")
		// Three seconds of 429 with Retry-After: 1. Unthrottled, the run sends
		// hundreds of writes a second; held back, a few per second.
		Expect(throttled.Load()).To(BeNumerically("<", 60), "writers wait for Retry-After instead of hammering")
		Expect(throttled.Load()).To(BeNumerically(">", 0))
		GinkgoWriter.Printf("writers reported before throttling %v, after %v; %d PATCHes, %d answered 429\n",
			before, after, patches.Load(), throttled.Load())
		Expect(after).NotTo(BeEmpty())
		Expect(slices.Min(after)).To(BeNumerically("<", before[len(before)-1]), "the limit dropped")
	})
})

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
