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

package robustness_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graduator/graduator/conversion/v1alpha1"
	"github.com/graduator/graduator/internal/space"
	"github.com/graduator/graduator/test/robustness"
)

// The quota rig (ROBUSTNESS_RIG=quota): etcd with a 64 MiB space quota,
// told to the policy (and the embedder), an API server that compacts every
// 10 s, pizzas padded so that one pass over them adds more than etcd has
// left near its quota, and in every run the etcd-near-quota fault: ballast
// that leaves etcd 24-26 MiB under its quota while the main pass writes,
// with the seed's other faults and a SIGKILL in the main pass. The
// engine's space budget, over every writer of the graduation (the
// retirement's managedFields cleanup too), is then what keeps etcd under
// its quota (invariant 7).
const (
	rigQuota = "quota"
	// etcdQuota is etcd's --quota-backend-bytes.
	etcdQuota = 64 << 20
	// compactionInterval is the API server's --etcd-compaction-interval (5
	// min by default): the budget frees its writes only at a compaction.
	// Longer than a pass over the pizzas takes unpaced (6-8 s here), so
	// that such a pass adds all it writes before a compaction frees any;
	// with 2 s, a pass without a budget peaked at 53.7 MiB of 64.
	compactionInterval = 10 * time.Second
	// dbMetricPoll is the API server's --etcd-db-metric-poll-interval (30 s
	// by default): a run's budget reads the database's size from that
	// gauge at its start, so it must show the ballast by then.
	dbMetricPoll = time.Second
	// paddingBytes is the annotation that pads every pizza (annotations
	// hold 256 KiB at most): 120 pizzas then take about 29 MiB of etcd's
	// database (160 KiB took 19.3 MiB), and a pass adds as much, more than
	// the 24-26 MiB the ballast leaves. Every pizza of the population (the
	// client creates small ones of its own): the budget samples a page's
	// first and last objects only, so a page of mixed sizes is charged by
	// guess (docs/reliability.md), and the rig checks the budget, not its
	// sampling.
	paddingBytes = 240 << 10
	// paddingAnnotation carries the padding; metadata survives every
	// conversion, and the Pizza schema has no field that large.
	paddingAnnotation = "robustness.graduator.io/padding"
	// ballastNamespace holds the ballast's ConfigMaps, ballastPiece bytes
	// each (a ConfigMap holds up to 1 MiB).
	ballastNamespace = "robustness-ballast"
	ballastPiece     = 512 << 10
	// othersBeforeRun is what etcd's database grows by between the ballast
	// and the run's first read of its size (the client rewrites padded
	// pizzas, the API server its leases and events): 2-3.5 MiB seen.
	othersBeforeRun = 4 << 20
	// ballastNear: within it of its target, the ballast is defragmented
	// before every piece (writeBallast).
	ballastNear = 6 << 20
)

var rig = rigFromEnv()

func rigFromEnv() string {
	switch r := os.Getenv("ROBUSTNESS_RIG"); r {
	case "", rigQuota:
		return r
	default:
		panic(fmt.Sprintf("ROBUSTNESS_RIG=%q: want empty or %q", r, rigQuota))
	}
}

// configureRig sets the control plane's flags of the rig.
func configureRig(env *envtest.Environment) {
	if rig != rigQuota {
		return
	}
	if env.ControlPlane.Etcd == nil {
		env.ControlPlane.Etcd = &envtest.Etcd{}
	}
	env.ControlPlane.Etcd.Configure().Set("quota-backend-bytes", strconv.Itoa(etcdQuota))
	apiServer := env.ControlPlane.GetAPIServer()
	apiServer.Configure().Set("etcd-compaction-interval", compactionInterval.String())
	apiServer.Configure().Set("etcd-db-metric-poll-interval", dbMetricPoll.String())
}

// drawFor is the schedule of seed in this rig.
func drawFor(seed uint64) robustness.Schedule {
	s := robustness.Draw(seed, size)
	if rig != rigQuota {
		return s
	}
	// The pass is paced by the budget the rule gives at the ballast's
	// least headroom, less what other writes add before the run reads the
	// database's size (othersBeforeRun).
	budget, _ := space.BudgetFor(space.Etcd{
		DatabaseSize: etcdQuota - robustness.NearQuotaHeadroom[0] + othersBeforeRun, Quota: etcdQuota})
	return robustness.WithNearQuota(s, robustness.PacedPass(passBytes(), budget, compactionInterval))
}

// padded tells whether pizza i carries the padding: every one in the rig.
func padded(int) bool { return rig == rigQuota }

// lagLimit is how many pizzas a lagging API server writes at most: in the
// rig its writes are outside the migration's budget, and etcd near its
// quota has room for a few.
func lagLimit() int {
	if rig == rigQuota {
		return 8
	}
	return math.MaxInt
}

// clearEtcd compacts and defragments etcd before a run's pizzas go in
// (the last run's are deleted but may not be compacted yet); nothing
// outside the rig.
func clearEtcd(ctx context.Context) {
	if rig == rigQuota {
		Expect(compactAndDefragment(ctx)).To(Succeed())
	}
}

// passBytes is what one pass over the pizzas adds to etcd (a pizza's own
// JSON and managedFields taken as 2 KB).
func passBytes() int64 {
	var n int64
	for i := range size.Objects {
		if padded(i) {
			n += space.WriteCost(paddingBytes + 2<<10)
		} else {
			n += space.WriteCost(2 << 10)
		}
	}
	return n
}

// pad adds the padding to pizza i when it carries one.
func pad(p *v1alpha1.Pizza, i int) *v1alpha1.Pizza {
	if !padded(i) {
		return p
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[paddingAnnotation] = strings.Repeat(fmt.Sprintf("%05d", i), paddingBytes/5)
	return p
}

// toldQuota is the etcd quota the policy and the embedder are told (0:
// none, etcd's default).
func toldQuota() int64 {
	if rig != rigQuota {
		return 0
	}
	return etcdQuota
}

// quotaSetting is toldQuota as the policy's spec.migration.etcdQuota.
func quotaSetting() *resource.Quantity {
	if rig != rigQuota {
		return nil
	}
	return resource.NewQuantity(toldQuota(), resource.BinarySI)
}

// ---------------------------------------------------------------------------
// The fault, and invariant 7.

// nearQuota is etcd-near-quota in flight: the ballast, the watch of etcd's
// alarms, and its removal once the run reaches the fault's end.
type nearQuota struct {
	fault  robustness.Fault
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	alarms  []string
	ended   time.Time
	endedIn robustness.Stage
	// peak is etcd's database's largest size seen while the ballast was
	// in; budget the budget the run's status showed last, waits the
	// compaction waits it showed.
	peak      int64
	peakAfter int64
	budget    string
	waits     int
	lastWait  string
}

// running is the run's etcd-near-quota, checked with invariants 2 and 3
// while the run goes; nil outside the rig.
var running *nearQuota

// holdNearQuota brings etcd near its quota (when the schedule asks for it)
// and watches etcd's alarms until the fault is removed and the run ends.
// The ballast goes in before the run starts: a run computes its budget
// once, from the database's size at its start, so only ballast that is
// there then is ballast the budget can answer for (docs/reliability.md).
func holdNearQuota(ctx context.Context, s robustness.Schedule) *nearQuota {
	i := slices.IndexFunc(s.Faults, func(f robustness.Fault) bool { return f.Kind == robustness.NearQuota })
	if i < 0 {
		return nil
	}
	q := &nearQuota{fault: s.Faults[i], done: make(chan struct{})}
	target := int64(etcdQuota) - q.fault.Headroom
	By(fmt.Sprintf("etcd near its quota: ballast until its database is %s of %s", mib(target), mib(etcdQuota)))
	Expect(compactAndDefragment(ctx)).To(Succeed())
	if size, err := dbSize(ctx); err == nil {
		_, _ = fmt.Fprintf(GinkgoWriter, "%s: etcd's database is %s with the pizzas, defragmented\n", time.Now().Format("15:04:05.000"), mib(size))
	}
	DeferCleanup(func(ctx context.Context) { Expect(removeBallast(ctx)).To(Succeed()) })
	// An alarm raised since the last run's watch ended is not this run's.
	if stale, err := raisedAlarms(ctx); err == nil && len(stale) > 0 {
		_, _ = fmt.Fprintf(GinkgoWriter, "etcd's alarms %v from before the run, disarmed\n", stale)
		_, err = etcd.Client().AlarmDisarm(ctx, &clientv3.AlarmMember{})
		Expect(err).NotTo(HaveOccurred())
	}
	// Defragmented, etcd's database is its live data: the headroom is then
	// what every write must fit in until a compaction frees pages, not
	// free pages that happen to be left inside the file.
	writeBallast(ctx, target, q.fault.Headroom/2)
	size, err := dbSize(ctx)
	Expect(err).NotTo(HaveOccurred())
	raised, err := raisedAlarms(ctx)
	Expect(err).NotTo(HaveOccurred())
	Expect(raised).To(BeEmpty(), "the ballast alone raised no alarm")
	Expect(size).To(BeNumerically("<=", target+2*ballastPiece),
		"the ballast left its headroom, to a piece (the database is %s)", mib(size))
	// The budget reads the database's size from this gauge at the run's
	// start: the run starts once it shows the ballast.
	Eventually(ctx, apiServerStorageSize).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).
		Should(BeNumerically(">=", target), "the API server's %s shows the ballast", "apiserver_storage_size_bytes")
	_, _ = fmt.Fprintf(GinkgoWriter, "%s: etcd's database is %s of its %s quota with the ballast\n",
		time.Now().Format("15:04:05.000"), mib(size), mib(etcdQuota))
	running = q
	DeferCleanup(func() { running = nil })
	return q
}

// removeAt watches etcd's alarms and removes the ballast once the run
// reaches the fault's end (or the spec ends); nil-safe.
func (q *nearQuota) removeAt(stages *stageTracker) {
	if q == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	q.cancel = cancel
	DeferCleanup(q.wait)
	go func() {
		defer GinkgoRecover()
		defer close(q.done)
		until := robustness.StageRank(q.fault.Until)
		for ctx.Err() == nil && robustness.StageRank(stages.current()) < until {
			q.pollAlarms(ctx)
			q.pollSpace(ctx, stages.policy)
			sleepCtx(ctx, 50*time.Millisecond)
		}
		stage := stages.current()
		// The alarm is disarmed below: read it first.
		q.pollAlarms(context.Background())
		removeCtx, stop := context.WithTimeout(context.Background(), 2*time.Minute)
		defer stop()
		Expect(removeBallast(removeCtx)).To(Succeed())
		q.mu.Lock()
		q.ended, q.endedIn = time.Now(), stage
		q.mu.Unlock()
		q.mu.Lock()
		_, _ = fmt.Fprintf(GinkgoWriter, "%s: the ballast removed at %s; with it, etcd's database peaked at %s of its %s quota; "+
			"the run's budget: %s; %d compaction waits\n", time.Now().Format("15:04:05.000"), stage, mib(q.peak), mib(etcdQuota), q.budget, q.waits)
		q.mu.Unlock()
		// Nothing the graduation writes after may raise it either.
		for ctx.Err() == nil {
			q.pollAlarms(ctx)
			if size, err := dbSize(ctx); err == nil {
				q.mu.Lock()
				q.peakAfter = max(q.peakAfter, size)
				q.mu.Unlock()
			}
			sleepCtx(ctx, 50*time.Millisecond)
		}
		q.mu.Lock()
		_, _ = fmt.Fprintf(GinkgoWriter, "%s: since the ballast went, etcd's database peaked at %s\n", time.Now().Format("15:04:05.000"), mib(q.peakAfter))
		q.mu.Unlock()
	}()
}

// waitRemoved waits until the ballast was removed, and returns when and
// the stage the run was in then; a violation of invariant 2, 3 or 7 ends
// the wait at once.
func (q *nearQuota) waitRemoved(ctx context.Context, policy *policyWatch, guard *storageGuard, timeout time.Duration) (time.Time, robustness.Stage) {
	Eventually(ctx, func() (bool, error) {
		if err := violated(guard, policy); err != nil {
			return false, err
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		return !q.ended.IsZero(), nil
	}).WithTimeout(timeout).WithPolling(100*time.Millisecond).Should(BeTrue(), "the run reaches %s, where the ballast goes", q.fault.Until)
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ended, q.endedIn
}

// alarmsSeen stops the watch of etcd's alarms and returns what it saw.
func (q *nearQuota) alarmsSeen() []string {
	q.wait()
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.alarms)
}

func (q *nearQuota) wait() {
	if q.cancel != nil {
		q.cancel()
	}
	<-q.done
}

// pollAlarms records the alarms etcd has raised, with its database's size.
func (q *nearQuota) pollAlarms(ctx context.Context) {
	raised, err := raisedAlarms(ctx)
	if err != nil || len(raised) == 0 {
		return
	}
	size, _ := dbSize(ctx)
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.alarms) == 0 {
		q.alarms = append(q.alarms, fmt.Sprintf("%s at %s (etcd's database %s of its %s quota; the ballast left %s)",
			strings.Join(raised, ","), time.Now().Format("15:04:05.000"), mib(size), mib(etcdQuota), mib(q.fault.Headroom)))
	}
}

// pollSpace records the database's size and the run's budget and waits.
func (q *nearQuota) pollSpace(ctx context.Context, policy *policyWatch) {
	size, err := dbSize(ctx)
	status := policy.status()
	q.mu.Lock()
	defer q.mu.Unlock()
	if err == nil {
		q.peak = max(q.peak, size)
	}
	if status == nil || status.Migration == nil {
		return
	}
	if status.Migration.SpaceBudget != "" {
		q.budget = status.Migration.SpaceBudget
	}
	if w := status.Migration.CompactionWait; w != "" && w != q.lastWait {
		q.waits++
	}
	q.lastWait = status.Migration.CompactionWait
}

// violation is invariant 7's: etcd raised an alarm during the run.
func (q *nearQuota) violation() error {
	if q == nil {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.alarms) == 0 {
		return nil
	}
	return StopTrying("invariant 7: etcd raised " + q.alarms[0] + ": a write went past the etcd space budget")
}

// writeBallast writes ConfigMaps until etcd's database, defragmented, is
// target bytes or more: its live data. The database grows faster than its
// live data while the ballast goes in (a 512 KiB value needs its free pages
// in one run, and pages freed while a read is open are not reused until it
// ends), and etcd's status shows its size as of its last commit (up to
// 100 ms behind, several pieces): so within ballastNear of the target, or
// when the next piece could bring it within margin of the quota, it is
// defragmented before every piece. The ballast alone never reaches the
// quota, passes the target by at most a piece, and leaves no free pages
// that would widen the headroom.
func writeBallast(ctx context.Context, target, margin int64) {
	err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ballastNamespace}})
	Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
	for i := 0; ; i++ {
		size, err := dbSize(ctx)
		Expect(err).NotTo(HaveOccurred())
		if size >= target-ballastNear || size+2*ballastPiece > etcdQuota-margin {
			Expect(compactAndDefragment(ctx)).To(Succeed())
			if size, err = dbSize(ctx); err == nil && size >= target {
				return
			}
			Expect(err).NotTo(HaveOccurred())
		}
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ballast-%04d", i), Namespace: ballastNamespace},
			Data:       map[string]string{"ballast": strings.Repeat(fmt.Sprintf("%04d", i), ballastPiece/4)},
		}
		if err := k8sClient.Create(ctx, cm); err != nil {
			raised, _ := raisedAlarms(ctx)
			Fail(fmt.Sprintf("ballast %d with etcd's database at %s (alarms %v): %v", i, mib(size), raised, err))
		}
	}
}

// removeBallast deletes the ballast and gives etcd its space back as an
// operator would after NOSPACE: compaction, defragmentation, and the alarm
// disarmed.
func removeBallast(ctx context.Context) error {
	err := k8sClient.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ballastNamespace))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the ballast: %w", err)
	}
	if err := compactAndDefragment(ctx); err != nil {
		return err
	}
	if _, err := etcd.Client().AlarmDisarm(ctx, &clientv3.AlarmMember{}); err != nil {
		return fmt.Errorf("disarm etcd's alarms: %w", err)
	}
	return nil
}

// compactAndDefragment compacts etcd at its current revision and
// defragments it: its database is then its live data.
func compactAndDefragment(ctx context.Context) error {
	c := etcd.Client()
	resp, err := c.Get(ctx, "compact-probe")
	if err != nil {
		return fmt.Errorf("read etcd's revision: %w", err)
	}
	if _, err := c.Compact(ctx, resp.Header.Revision); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return fmt.Errorf("compact etcd at %d: %w", resp.Header.Revision, err)
	}
	if _, err := c.Defragment(ctx, c.Endpoints()[0]); err != nil {
		return fmt.Errorf("defragment etcd: %w", err)
	}
	return nil
}

func dbSize(ctx context.Context) (int64, error) {
	status, err := etcd.Client().Status(ctx, etcd.Client().Endpoints()[0])
	if err != nil {
		return 0, fmt.Errorf("read etcd's status: %w", err)
	}
	return status.DbSize, nil
}

func raisedAlarms(ctx context.Context) ([]string, error) {
	resp, err := etcd.Client().AlarmList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list etcd's alarms: %w", err)
	}
	var out []string
	for _, a := range resp.Alarms {
		out = append(out, a.Alarm.String())
	}
	return out, nil
}

// apiServerStorageSize is the API server's apiserver_storage_size_bytes
// (the largest series), what the engine's budget reads.
func apiServerStorageSize(ctx context.Context) (int64, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(testEnv.Config)
	if err != nil {
		return 0, err
	}
	data, err := dc.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the API server's /metrics: %w", err)
	}
	var size float64
	scanner := bufio.NewScanner(bytes.NewReader(data))
	scanner.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		if !strings.HasPrefix(line, "apiserver_storage_size_bytes") {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			size = max(size, v)
		}
	}
	return int64(size), nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func mib(n int64) string { return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20)) }
