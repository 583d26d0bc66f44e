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
	"errors"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/graduator/graduator/internal/enginehook"
	"github.com/graduator/graduator/internal/errclass"
	"github.com/graduator/graduator/internal/limit"
	"github.com/graduator/graduator/internal/space"
)

const mib = int64(1) << 20

var _ = Describe("the etcd space budget in a run", func() {
	It("hands on the budget's own ledger, and assumes its default quota", func() {
		l := space.Ledger{InUse: 1, Peak: 2, Outstanding: 3, Revision: 4}
		Expect(space.Ledger(SpaceLedger(l))).To(Equal(l))
		Expect(DefaultEtcdQuota).To(Equal(space.DefaultQuota))
	})

	It("says, when it waits with the quota not told, where to tell it", func() {
		r := &runner{}
		r.hook.QuotaSetting = "--etcd-quota"
		Expect(r.quotaHint()).To(ContainSubstring("tell the quota with --etcd-quota"))
		r.progress.DatabaseSize = 20 * mib
		Expect(r.quotaHint()).To(ContainSubstring("its default 2Gi is assumed: if the quota is larger, tell it with --etcd-quota"))
		r.opts.EtcdQuota = 192 * mib
		Expect(r.quotaHint()).To(BeEmpty(), "a told quota is not hinted at")
	})

	It("shows a wait for a compaction in the progress, and its end", func(ctx SpecContext) {
		var reports []Progress
		r := &runner{writers: limit.New(8, false, limit.Background)}
		r.opts.OnProgress = func(p Progress) { reports = append(reports, p) }
		r.space, _, _ = space.Inputs{Fixed: 8 * mib}.New(ctx, nil, "widgets")
		r.startWait(ctx, "101")
		Expect(r.progress.CompactionWaits).To(Equal(1))
		Expect(reports).To(HaveLen(1))
		Expect(reports[0].CompactionWait).To(ContainSubstring("waiting for etcd's next compaction past resourceVersion 101"))
		Expect(reports[0].CompactionWait).To(ContainSubstring("its budget of 8Mi"))
		Expect(reports[0].CompactionWait).To(ContainSubstring("tell the quota with Options.EtcdQuota"))
	})

	It("never waits when the budget is off", func(ctx SpecContext) {
		r := &runner{writers: limit.New(8, false, limit.Background)}
		r.space, _, _ = space.Inputs{Fixed: -1}.New(ctx, nil, "widgets")
		for range 1000 {
			_, err := r.reserveSpace(ctx, space.WriterPass)
			Expect(err).NotTo(HaveOccurred())
		}
	})
})

var _ = Describe("a full etcd (NOSPACE)", func() {
	It("stops the run at its first answer, without retrying, with what to do", func(ctx SpecContext) {
		c := newFakeClient("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")
		var patches atomic.Int32
		c.PrependReactor("patch", "widgets", func(clienttesting.Action) (bool, runtime.Object, error) {
			patches.Add(1)
			return true, nil, apierrors.NewInternalError(errors.New("etcdserver: mvcc: database space exceeded"))
		})
		res, err := Run(enginehook.With(ctx, enginehook.Hook{FixedConcurrency: true}), c, Options{Resource: fakeWidgets, Concurrency: 1})
		Expect(err).To(HaveOccurred())
		Expect(errclass.IsNoSpace(err)).To(BeTrue())
		var full *EtcdFullError
		Expect(errors.As(err, &full)).To(BeTrue())
		Expect(err.Error()).To(ContainSubstring("etcdctl alarm disarm"))
		Expect(patches.Load()).To(Equal(int32(1)), "one write, no retries")
		Expect(res.Complete).To(BeFalse())
		Expect(res.Rewritten+res.Skipped+res.Failed).To(BeZero(), "the page is not counted: a later run repeats it")
	})
})
