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

package migration

import (
	"context"
	"fmt"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/graduator/graduator/internal/enginehook"
	"github.com/graduator/graduator/internal/space"
)

var _ = Describe("every writer of a graduation within the etcd space budget", func() {
	It("names each pass's writes as one of the writers", func() {
		for _, kind := range []passKind{mainPass, catchUpPass} {
			Expect(space.Writers).To(ContainElement(kind.writer()))
		}
		Expect(mainPass.writer()).NotTo(Equal(catchUpPass.writer()))
	})

	It("charges every write the API server took, of the run and of the managedFields cleanup", func(ctx SpecContext) {
		names := make([]string, 40)
		for i := range names {
			names[i] = fmt.Sprintf("w-%02d", i)
		}
		c := newFakeClient(names...)
		var mu sync.Mutex
		patches := 0 // the writes the fake API server took
		c.PrependReactor("patch", "widgets", func(clienttesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			patches++
			mu.Unlock()
			return false, nil, nil
		})
		var runCharged, cleanupCharged map[space.Writer]space.Charge
		// A budget on, and never waited for.
		hook := enginehook.Hook{SpaceBudget: 64 << 20, OnCharged: func(c map[space.Writer]space.Charge) { runCharged = c }}
		res, err := Run(enginehook.With(ctx, hook), c, Options{Resource: fakeWidgets, Concurrency: 4})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Complete).To(BeTrue())
		hook.OnCharged = func(c map[space.Writer]space.Charge) { cleanupCharged = c }
		cleaned, err := CleanupManagedFieldsWithin(enginehook.With(ctx, hook), c, fakeWidgets, []string{"v2"}, CleanupOptions{Previous: res.Space})
		Expect(err).NotTo(HaveOccurred())
		Expect(cleaned.Cleaned).To(Equal(len(names)))

		charged := map[space.Writer]space.Charge{}
		for _, charges := range []map[space.Writer]space.Charge{runCharged, cleanupCharged} {
			for w, ch := range charges {
				Expect(space.Writers).To(ContainElement(w), "a writer not named in space.Writers")
				charged[w] = space.Charge{Writes: charged[w].Writes + ch.Writes, Bytes: charged[w].Bytes + ch.Bytes}
			}
		}
		var writes int64
		for _, ch := range charged {
			writes += ch.Writes
		}
		mu.Lock()
		defer mu.Unlock()
		Expect(writes).To(Equal(int64(patches)), "every write charged once: %v", charged)
		Expect(charged[space.WriterPass].Writes).To(Equal(res.Rewritten))
		Expect(charged[space.WriterCleanup].Writes).To(Equal(int64(cleaned.Cleaned)), "the cleanup's patches are charged")
		Expect(charged[space.WriterCleanup].Bytes).To(BeNumerically(">=", int64(cleaned.Cleaned)*space.WriteCost(100)))
	})

	It("has the cleanup wait for a compaction when its budget is spent", func(ctx SpecContext) {
		c := newFakeClient("w-0", "w-1", "w-2")
		var waits []string
		waiting, stop := context.WithCancel(ctx)
		defer stop()
		onePatch := enginehook.With(waiting, enginehook.Hook{SpaceBudget: 1}) // one patch at a time
		_, err := CleanupManagedFieldsWithin(onePatch, c, fakeWidgets, []string{"v2"}, CleanupOptions{
			Previous: SpaceLedger{InUse: 1, Peak: 1, Outstanding: 1, Revision: 7},
			OnCompactionWait: func(why string) {
				waits = append(waits, why)
				stop()
			},
		})
		// The fake API server never answers 410 Gone: the inherited write at
		// revision 7 is never compacted, so the first patch waits until the
		// context ends.
		Expect(err).To(HaveOccurred())
		Expect(waits).NotTo(BeEmpty())
		Expect(waits[0]).To(ContainSubstring("past resourceVersion 7"))
		Expect(waits[0]).To(ContainSubstring("managedFields cleanup"))
	})
})
