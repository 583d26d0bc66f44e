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

package quota

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/graduator/graduator/internal/enginehook"
	"github.com/graduator/graduator/internal/errclass"
	"github.com/graduator/graduator/migration"
	"github.com/graduator/graduator/test/envtestutil"
)

// migrate runs the engine as every door does (with a rest.Config) and
// records the peak of etcd's database size and the compactions waited for.
func migrate(ctx context.Context, p *population, gvr schema.GroupVersionResource, opts migration.Options) (migration.Result, int64, time.Duration, error) {
	opts.Resource = gvr
	if opts.Config == nil {
		opts.Config = env.Config
	}
	var waits []string
	opts.OnProgress = func(pr migration.Progress) {
		if pr.CompactionWait != "" {
			waits = append(waits, pr.CompactionWait)
		}
	}
	before, _ := etcdState(ctx)
	monitor := watchPeak(ctx)
	start := time.Now()
	res, err := migration.Run(ctx, env.Dynamic, opts)
	took := time.Since(start)
	peak := monitor.finish()
	quotaRuns = append(quotaRuns, quotaRun{spec: CurrentSpecReport().LeafNodeText, objects: p.n, bytes: p.size,
		budget: res.SpaceBudget, before: before, peak: peak, took: took, waits: res.CompactionWaits, err: err})
	size, _ := etcdState(ctx)
	GinkgoWriter.Printf("%d objects of %d B: %d rewritten in %s (%.0f/s); budget %s; %d compactions waited for; database peak %s (%.0f%% of the %s quota), now %s\n",
		p.n, p.size, res.Rewritten, took.Round(time.Millisecond), float64(res.Rewritten)/took.Seconds(), res.SpaceBudgetReason,
		res.CompactionWaits, mib(peak), 100*float64(peak)/quota, mib(quota), mib(size))
	for _, w := range waits {
		GinkgoWriter.Println("  ", w)
	}
	return res, peak, took, err
}

var _ = Describe("a migration never fills etcd", Ordered, func() {
	It("does not slow 300 B objects: the budget never waits for them", func(ctx SpecContext) {
		p := newPopulation(ctx, "small", 300)
		p.grow(ctx, 3000)
		p.switchStorage(ctx, "v2")
		res, _, took, err := migrate(ctx, p, p.v2, migration.Options{})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Complete).To(BeTrue())
		Expect(res.Rewritten).To(BeEquivalentTo(p.n))
		Expect(res.CompactionWaits).To(BeZero(), "3,000 objects of 300 B add about 3 MiB, under any budget")
		Expect(res.DatabaseSize).To(BeNumerically(">", 0), "the size is read from the API server's /metrics")

		// The same run without the budget, for the rate: the budget costs a
		// /metrics read at the start and two GETs per page of 500.
		p.switchStorage(ctx, "v1")
		off, _, tookOff, err := migrate(enginehook.With(ctx, enginehook.Hook{SpaceBudget: -1}), p, p.v1, migration.Options{})
		Expect(err).NotTo(HaveOccurred())
		Expect(off.Complete).To(BeTrue())
		AddReportEntry("300 B objects", map[string]any{"with budget": took.String(), "without": tookOff.String()})
	})

	// Before the specs that leave their populations in etcd.
	sharedBudgetSpecs()

	It("graduates the second CRD of a fleet near the ceiling at the first one's pace, after the first grew etcd's file", func(ctx SpecContext) {
		// Two CRDs of a selector policy, of as many objects each, hold
		// about 62% of the quota between them, each pass about three
		// budgets. The first one's run grows
		// etcd's file to about the ceiling; the second follows it with its
		// space ledger, as every writer to the etcd hands it to the next
		// (space.Pool, in the process, and the Lease between processes).
		// Without the ledger the second run would read the grown file and
		// start at the floor, 3 MiB per compaction.
		// The fleet starts from a database that is its live data, whatever
		// the specs before it left in etcd's file: the passes' size
		// against the budget is then the same in the suite and alone.
		restore(ctx)
		fleet := []*population{newPopulation(ctx, "fleet1", 16000), newPopulation(ctx, "fleet2", 16000)}
		fleet[0].growTo(ctx, quota*31/100, 250)
		fleet[1].grow(ctx, fleet[0].n)
		DeferCleanup(func(ctx SpecContext) {
			// The 16 KB migration after this spec starts from a file
			// without the fleet's pages.
			for _, p := range fleet {
				Expect(envtestutil.DeleteCRD(ctx, env.Client, p.crd.Name, 5*time.Minute)).To(Succeed())
			}
			restore(ctx)
		})
		before, _ := etcdState(ctx)
		GinkgoWriter.Printf("a fleet of CRDs of %d and %d objects of 16 KB; etcd's database at %s (%.0f%% of the quota)\n",
			fleet[0].n, fleet[1].n, mib(before), 100*float64(before)/quota)

		var first firstRun
		var prev migration.SpaceLedger // the first CRD follows no run
		for i, p := range fleet {
			By(fmt.Sprintf("the fleet's CRD %d of %d", i+1, len(fleet)))
			p.switchStorage(ctx, "v2")
			fileBefore, _ := etcdState(ctx)
			res, peak, took, err := migrate(ctx, p, p.v2, migration.Options{EtcdQuota: quota, Previous: prev})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Complete).To(BeTrue())
			Expect(res.Rewritten).To(BeEquivalentTo(p.n))
			_, alarms := etcdState(ctx)
			Expect(alarms).To(BeEmpty(), "no NOSPACE alarm")
			Expect(peak).To(BeNumerically("<=", quota*90/100), "the database peaked at %s of the %s quota", mib(peak), mib(quota))
			Expect(p.storedAs(ctx)).To(Equal(map[string]int{p.group + "/v2": p.n}), "every object is stored as v2")
			prev = res.Space
			if i == 0 {
				first = firstRun{before: fileBefore, took: took, waits: res.CompactionWaits, space: res.Space, budget: res.SpaceBudget}
				Expect(res.CompactionWaits).To(BeNumerically(">", 0), "the budget paced the first CRD's run")
				continue
			}
			GinkgoWriter.Printf("the fleet's second CRD (etcd's file %s before it): %s, %d compactions waited for, budget %s; the first (the file %s before it): %s, %d waits, budget %s (%.2fx the first one's time)\n",
				mib(fileBefore), took.Round(time.Second), res.CompactionWaits, mib(res.SpaceBudget), mib(first.before), first.took.Round(time.Second), first.waits, mib(first.budget), took.Seconds()/first.took.Seconds())
			AddReportEntry("the fleet's second CRD near the ceiling", map[string]any{"first": first.took.String(), "second": took.String(),
				"ratio": took.Seconds() / first.took.Seconds(), "first waits": first.waits, "second waits": res.CompactionWaits})
			Expect(res.SpaceBudget).To(BeNumerically(">", quota/64), "the second CRD is not at the floor: %s", res.SpaceBudgetReason)
			Expect(res.SpaceBudgetReason).To(ContainSubstring("pages the runs before this one freed"), "the budget says what it is based on")
			// etcd's file grew by the first run's writes and by the pages
			// around them (20-30% more than they were charged): both are
			// freed again, and the second run's budget counts both.
			if grown := res.DatabaseSize - first.space.InUse; grown > first.space.Peak {
				peakOnly := max(quota*3/4-(res.DatabaseSize-first.space.Peak), quota/64)
				Expect(res.SpaceBudget).To(BeNumerically(">", peakOnly),
					"the file grew by %s, the first run's writes held %s: the pages around them are the run's, not others' data (%s)", mib(grown), mib(first.space.Peak), res.SpaceBudgetReason)
			}
			// It waits once more at most: the first run's last writes are
			// charged to it until a compaction frees them
			// (SpaceLedger.Outstanding), up to a budget.
			Expect(res.CompactionWaits).To(BeNumerically("<=", first.waits+1), "the second CRD kept the first one's pace")
			Expect(took.Seconds()/first.took.Seconds()).To(BeNumerically("<=", 1.5), "the second CRD took %s, the first %s", took, first.took)
		}
	}, SpecTimeout(20*time.Minute))

	var big *population
	var bigRun firstRun
	It("migrates 16 KB objects filling 55% of the quota completely, told the quota: no alarm, the database under 90% of the quota", func(ctx SpecContext) {
		big = newPopulation(ctx, "big", 16000)
		big.growTo(ctx, quota*55/100, 250)
		before, _ := etcdState(ctx)
		GinkgoWriter.Printf("%d objects of 16 KB; etcd's database at %s (%.0f%% of the quota)\n", big.n, mib(before), 100*float64(before)/quota)
		big.switchStorage(ctx, "v2")

		// A quota below etcd's default must be told (the budget assumes
		// 2 GiB otherwise), as the README says where the install is.
		res, peak, took, err := migrate(ctx, big, big.v2, migration.Options{EtcdQuota: quota})
		bigRun = firstRun{before: before, took: took, waits: res.CompactionWaits, space: res.Space}
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Complete).To(BeTrue())
		Expect(res.Failed).To(BeZero())
		Expect(res.Rewritten).To(BeEquivalentTo(big.n))
		_, alarms := etcdState(ctx)
		Expect(alarms).To(BeEmpty(), "no NOSPACE alarm")
		Expect(peak).To(BeNumerically("<=", quota*90/100), "the database peaked at %s of the %s quota", mib(peak), mib(quota))
		// Sharper, and true on a slow machine too (where a run without a
		// budget can stay under 90% by being slower than the compactions):
		// the database grows by about one budget, that of the rule.
		budget := max(quota*3/4-before, quota/64) // the rule with the quota told, stated here again
		Expect(peak-before).To(BeNumerically("<=", budget*3/2), "the database grew by %s; the rule's budget is %s", mib(peak-before), mib(budget))
		Expect(res.CompactionWaits).To(BeNumerically(">", 0), "the budget paced the run")
		Expect(res.SpaceBudgetReason).To(ContainSubstring("of its 192Mi quota"), "the budget is the told quota's")
		Expect(big.storedAs(ctx)).To(Equal(map[string]int{big.group + "/v2": big.n}), "every object is stored as v2")
	}, SpecTimeout(10*time.Minute))

	It("resumes a run SIGKILLed halfway near the ceiling at the first run's pace, after that run grew etcd's file", func(ctx SpecContext) {
		Expect(big).NotTo(BeNil(), "runs after the 16 KB migration, which grew etcd's file to about the ceiling")
		first := bigRun
		fileBefore, _ := etcdState(ctx)
		big.switchStorage(ctx, "v1")

		By("a run stopped at half its pass, as a SIGKILL stops it between two saves")
		stopped, stop := context.WithCancel(ctx)
		var saved migration.Progress
		// It follows the first run, as a door carries the ledger in the
		// policy's status (status.migration.space) to the next run.
		opts := migration.Options{EtcdQuota: quota, Previous: first.space, OnProgress: func(p migration.Progress) {
			saved = p // what a door saves after every page
			if p.Rewritten >= int64(big.n/2) {
				stop()
			}
		}}
		opts.Resource, opts.Config = big.v1, env.Config
		start := time.Now()
		half, err := migration.Run(stopped, env.Dynamic, opts)
		stop()
		Expect(err).To(Or(BeNil(), MatchError(context.Canceled)))
		Expect(half.Complete).To(BeFalse())
		Expect(half.SpaceBudget).To(BeNumerically(">", quota/64), "the run that follows the first one is not at the floor: %s", half.SpaceBudgetReason)
		Expect(saved.Space.Peak).To(BeNumerically(">", 0), "the progress saved carries the run's space ledger")

		By("the run resumed from what was saved")
		res, peak, _, err := migrate(ctx, big, big.v1, migration.Options{EtcdQuota: quota, Resume: saved})
		took := time.Since(start)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Complete).To(BeTrue())
		_, alarms := etcdState(ctx)
		Expect(alarms).To(BeEmpty(), "no NOSPACE alarm")
		Expect(peak).To(BeNumerically("<=", quota*90/100), "the database peaked at %s of the %s quota", mib(peak), mib(quota))
		Expect(res.SpaceBudgetReason).To(ContainSubstring("pages the runs before this one freed"), "the budget says what it is based on")
		waits := res.CompactionWaits // the resumed run's count goes on from the saved progress's
		GinkgoWriter.Printf("the first run (etcd's file %s before it): %s, %d compactions waited for; stopped at half and resumed (the file %s at the start): %s, %d waits (%.2fx the first run's time; not a figure on a loaded machine)\n",
			mib(first.before), first.took.Round(time.Second), first.waits, mib(fileBefore), took.Round(time.Second), waits, took.Seconds()/first.took.Seconds())
		AddReportEntry("resumed near the ceiling", map[string]any{"first": first.took.String(), "stopped and resumed": took.String(),
			"ratio": took.Seconds() / first.took.Seconds(), "first waits": first.waits, "resumed waits": waits})
		// The pace, by the compactions waited for (times depend on the
		// machine): without the ledger the resumed half ran at the floor,
		// 3 MiB per compaction, about four times the first run's waits.
		Expect(waits).To(BeNumerically("<=", first.waits*3/2+1), "the resumed run kept the first one's pace")
	}, SpecTimeout(15*time.Minute))

	It("stops at once at etcd's NOSPACE, with what to do, and loses nothing", func(ctx SpecContext) {
		// A population the budget cannot save: it fills etcd to 93% of its
		// quota, and the budget, not told this quota below etcd's default,
		// assumes 2 GiB.
		filler := newPopulation(ctx, "filler", 16000)
		filler.growTo(ctx, quota*93/100, 50)
		DeferCleanup(func(ctx SpecContext) { restore(ctx) })
		filler.switchStorage(ctx, "v2")

		var full *migration.EtcdFullError
		patches := &patchRecorder{}
		res, _, _, err := migrate(ctx, filler, filler.v2, migration.Options{Config: patches.config()})
		Expect(err).To(HaveOccurred())
		first, after, total := patches.afterNoSpace()
		GinkgoWriter.Printf("%d PATCHes; the first NOSPACE answer at %s; %d PATCHes sent after it\n", total, first.Format(time.RFC3339Nano), after)
		Expect(first.IsZero()).To(BeFalse(), "etcd answered NOSPACE")
		Expect(after).To(BeZero(), "no write is sent after etcd's first NOSPACE answer")
		Expect(errors.As(err, &full)).To(BeTrue(), "%v", err)
		Expect(res.SpaceBudgetReason).To(ContainSubstring("default 2Gi is assumed"), "a quota below the default, not told")
		Expect(errclass.IsNoSpace(err)).To(BeTrue())
		Expect(err.Error()).To(ContainSubstring("etcdctl defrag"))
		Expect(err.Error()).To(ContainSubstring("etcdctl alarm disarm"))
		Expect(res.Complete).To(BeFalse())
		_, alarms := etcdState(ctx)
		Expect(alarms).To(ContainElement("NOSPACE"))

		By("every object is still readable with its content")
		filler.intact(ctx)
		if big != nil {
			big.intact(ctx)
		}
	}, SpecTimeout(5*time.Minute))
})

// firstRun is what the 16 KB migration measured, for the resumed run's.
type firstRun struct {
	before int64 // etcd's database when it started
	took   time.Duration
	waits  int
	space  migration.SpaceLedger // what its writes left, for the run that follows
	budget int64
}

// restore does what the error says: compact, defragment, disarm.
func restore(ctx context.Context) {
	c := env.Etcd.Client()
	resp, err := c.Get(ctx, "compact-probe")
	Expect(err).NotTo(HaveOccurred())
	// Physical: etcd otherwise deletes the compacted revisions in the
	// background, and a defragmentation that comes first keeps them.
	_, err = c.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical())
	if err != nil && !errors.Is(err, context.Canceled) {
		GinkgoWriter.Println("compact:", err)
	}
	_, err = c.Defragment(ctx, c.Endpoints()[0])
	Expect(err).NotTo(HaveOccurred())
	_, err = c.AlarmDisarm(ctx, &clientv3.AlarmMember{})
	Expect(err).NotTo(HaveOccurred())
}

// patchRecorder records when each PATCH is sent and when etcd's first
// NOSPACE answer came back.
type patchRecorder struct {
	mu      sync.Mutex
	sent    []time.Time
	noSpace time.Time
}

func (p *patchRecorder) config() *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodPatch {
				return rt.RoundTrip(req)
			}
			p.mu.Lock()
			p.sent = append(p.sent, time.Now())
			p.mu.Unlock()
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode >= 500 {
				body, _ := io.ReadAll(resp.Body)
				resp.Body = io.NopCloser(bytes.NewReader(body))
				if bytes.Contains(body, []byte("database space exceeded")) {
					p.mu.Lock()
					if p.noSpace.IsZero() {
						p.noSpace = time.Now()
					}
					p.mu.Unlock()
				}
			}
			return resp, err
		})
	})
	return cfg
}

// afterNoSpace returns the time of the first NOSPACE answer, the PATCHes
// sent after it and all PATCHes.
func (p *patchRecorder) afterNoSpace() (time.Time, int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	after := 0
	for _, t := range p.sent {
		if !p.noSpace.IsZero() && t.After(p.noSpace) {
			after++
		}
	}
	return p.noSpace, after, len(p.sent)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
