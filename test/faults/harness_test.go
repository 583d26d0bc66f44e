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
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	coordinationv1 "k8s.io/api/coordination/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/test/envtestutil"
	docfigures "github.com/graduator/graduator/test/figures"
)

// sizing is how hard the suite pushes: FAULTS_SIZE=reduced (the default, run
// by `make test`) or full (`make test-faults`).
type sizing struct {
	name string
	// objects per scenario.
	objects int
	// kills is how many SIGKILLs must land in the middle of the migration.
	kills int
	// webhookDown is how long the conversion webhook is stopped.
	webhookDown time.Duration
	// denyHold is how long the admission policy denying updates stays.
	denyHold time.Duration
	// pauseQuiet is how long no write may follow the Paused condition.
	pauseQuiet time.Duration
	// pageSize and qps of the migrations that must be caught mid-run.
	pageSize, qps int
	// deleteStaleLease: after a SIGKILL, delete the dead manager's lease
	// instead of waiting the 15 s it takes to expire (reduced only).
	deleteStaleLease bool
}

func sizeFromEnv() sizing {
	switch s := os.Getenv("FAULTS_SIZE"); s {
	case "full":
		return sizing{name: "full", objects: 20000, kills: 10, webhookDown: 90 * time.Second,
			denyHold: 30 * time.Second, pauseQuiet: 10 * time.Second, pageSize: 250, qps: 200}
	case "", "reduced":
		return sizing{name: "reduced", objects: 2000, kills: 3, webhookDown: 15 * time.Second,
			denyHold: 8 * time.Second, pauseQuiet: 4 * time.Second, pageSize: 100, qps: 150, deleteStaleLease: true}
	default:
		panic(fmt.Sprintf("FAULTS_SIZE=%q: want full or reduced", s))
	}
}

// ---------------------------------------------------------------------------
// The manager process.

// managerProc runs cmd/manager as a real process with leader election, the
// way a Deployment does (envtestutil.ManagerProcess): a manager that exits on
// its own (leader election lost, say) is started again, as the kubelet would.
type managerProc struct {
	*envtestutil.ManagerProcess
}

// startManager starts a supervised manager for the current spec and stops it
// (SIGTERM, then SIGKILL after 30 s) when the spec ends, whatever the outcome.
func startManager(name string) *managerProc {
	logPath := filepath.Join(GinkgoT().TempDir(), "manager.log")
	p, err := envtestutil.NewManagerProcess("manager "+name, managerBinary, logPath, func() ([]string, []string) {
		metrics, probes := freeLocalAddr(), freeLocalAddr()
		return []string{
			"--kubeconfig", managerKubeconfig, "--metrics-bind-address", metrics, "--health-probe-bind-address", probes,
			"--leader-elect", "--leader-election-namespace", "default",
		}, []string{metrics, probes}
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		p.Stop(30 * time.Second)
		if CurrentSpecReport().Failed() {
			AddReportEntry("manager log (last 60 lines)", envtestutil.Tail(logPath, 60))
		}
	})
	Expect(p.Start()).To(Succeed())
	return &managerProc{p}
}

func (m *managerProc) start() { ExpectWithOffset(1, m.Start()).To(Succeed()) }

// kill sends SIGKILL and waits until the process is gone.
func (m *managerProc) kill() { ExpectWithOffset(1, m.Kill()).To(Succeed()) }

// restarts is how many times the supervisor restarted a manager that exited
// on its own.
func (m *managerProc) restarts() int { return m.Restarts() }

// deleteLease deletes the leader election lease a SIGKILLed manager held, as
// if it had expired.
func deleteLease(ctx context.Context) {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "graduator.graduator.io", Namespace: "default"}}
	Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, lease))).To(Succeed())
}

// freeLocalAddr returns a loopback address with a port nobody listens on.
func freeLocalAddr() string {
	addr, err := envtestutil.FreeLocalAddr()
	Expect(err).NotTo(HaveOccurred())
	return addr
}

// ---------------------------------------------------------------------------
// CRDs and objects.

// installCRD creates the CRD, waits until every version is served, and
// deletes it (with its objects) when the spec ends.
func installCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) {
	Expect(k8sClient.Create(ctx, crd)).To(Succeed())
	DeferCleanup(deleteCRD, crd.Name)
	Expect(envtestutil.WaitServed(ctx, k8sClient, dyn, crd.Name)).To(Succeed())
}

// deleteCRD deletes a CRD, and so its objects, and waits until it is gone.
func deleteCRD(ctx context.Context, name string) {
	Expect(envtestutil.DeleteCRD(ctx, k8sClient, name, 5*time.Minute)).To(Succeed())
}

// storedVersions reads etcd: how many objects of the resource are stored
// under each apiVersion, and how many there are in all.
func storedVersions(ctx context.Context, group, plural string) (map[string]int, int) {
	byObject, err := etcd.APIVersions(ctx, group, plural)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	counts := map[string]int{}
	for _, v := range byObject {
		counts[v]++
	}
	return counts, len(byObject)
}

// expectAllStoredAs asserts, in etcd, that there are n objects, every one
// stored as apiVersion.
func expectAllStoredAs(ctx context.Context, group, plural, apiVersion string, n int) {
	counts, total := storedVersions(ctx, group, plural)
	ExpectWithOffset(1, total).To(Equal(n), "objects in etcd (%v)", counts)
	ExpectWithOffset(1, counts[apiVersion]).To(Equal(n), "objects stored as %s in etcd (%v)", apiVersion, counts)
}

// modRevisions reads etcd: the revision each object of the resource was
// last written at, keyed by namespace/name.
func modRevisions(ctx context.Context, group, plural string) map[string]int64 {
	prefix := fmt.Sprintf("%s/%s/%s/", etcd.Prefix, group, plural)
	resp, err := etcd.Client().Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	out := make(map[string]int64, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), prefix)] = kv.ModRevision
	}
	return out
}

// changedSince counts the objects whose revision differs from before (or
// that appeared or disappeared), with a few names.
func changedSince(before, after map[string]int64) (int, []string) {
	n := 0
	var examples []string
	for k, rev := range after {
		if before[k] != rev {
			n++
			if len(examples) < 5 {
				examples = append(examples, fmt.Sprintf("%s: revision %d -> %d", k, before[k], rev))
			}
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			n++
		}
	}
	return n, examples
}

// ---------------------------------------------------------------------------
// Policies.

func createPolicy(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy) {
	Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, policy))).To(Succeed())
	})
}

// policySpec is a policy's spec without its storage version: 16 writers at
// qps, pages of pageSize.
func policySpec(qps, pageSize int) graduatorv1alpha1.CRDVersionPolicySpec {
	return graduatorv1alpha1.CRDVersionPolicySpec{
		Migration: graduatorv1alpha1.MigrationSettings{
			Concurrency: 16, PageSize: int64(pageSize), QPS: int32(qps),
			SettleDelay: &metav1.Duration{Duration: time.Second},
		},
	}
}

// getPolicy reads the policy; nil when it cannot (the API server may be
// down).
func getPolicy(ctx context.Context, name string) *graduatorv1alpha1.CRDVersionPolicy {
	var p graduatorv1alpha1.CRDVersionPolicy
	if err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, &p); err != nil {
		return nil
	}
	return &p
}

func readyCondition(ctx context.Context, name string) *metav1.Condition {
	p := getPolicy(ctx, name)
	if p == nil {
		return nil
	}
	return meta.FindStatusCondition(p.Status.Conditions, graduatorv1alpha1.ConditionReady)
}

func isReady(ctx context.Context, name string) bool {
	c := readyCondition(ctx, name)
	return c != nil && c.Status == metav1.ConditionTrue
}

// waitReady waits until the policy is Ready=True and returns when that was
// seen.
func waitReady(ctx context.Context, name string, timeout time.Duration) time.Time {
	EventuallyWithOffset(1, func() *metav1.Condition { return readyCondition(ctx, name) }).
		WithTimeout(timeout).WithPolling(200*time.Millisecond).
		Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionTrue)), "policy %s is Ready", name)
	return time.Now()
}

// handled is how many objects the migration run saved as handled.
func handled(ctx context.Context, name string) int64 {
	p := getPolicy(ctx, name)
	if p == nil || p.Status.Migration == nil {
		return 0
	}
	m := p.Status.Migration
	return m.Rewritten + m.Skipped + m.Failed
}

// waitMidRun waits until the migration saved at least min handled objects,
// and fails if it finished first.
func waitMidRun(ctx context.Context, name string, minimum int64) {
	EventuallyWithOffset(1, func() (int64, error) {
		if isReady(ctx, name) {
			return 0, StopTrying("the policy became Ready before the fault could be injected mid-run")
		}
		return handled(ctx, name), nil
	}).WithTimeout(3 * time.Minute).WithPolling(100 * time.Millisecond).Should(BeNumerically(">=", minimum))
}

// crdStoredVersions is status.storedVersions of the CRD; nil when it cannot
// be read.
func crdStoredVersions(ctx context.Context, name string) []string {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
		return nil
	}
	return crd.Status.StoredVersions
}

// ---------------------------------------------------------------------------
// The prune watcher.

// pruneWatcher WATCHes the CRD and, the moment status.storedVersions no
// longer lists the old version, counts through etcd the objects still stored
// in the old apiVersion: a correct operator leaves none.
type pruneWatcher struct {
	crdName, group, plural, oldAPIVersion string

	mu         sync.Mutex
	prunedAt   time.Time
	oldAtPrune int
	err        error
	done       chan struct{}
}

func startPruneWatcher(ctx context.Context, f *figures, crdName, group, plural, oldVersion string) *pruneWatcher {
	w := &pruneWatcher{crdName: crdName, group: group, plural: plural, oldAPIVersion: group + "/" + oldVersion,
		oldAtPrune: -1, done: make(chan struct{})}
	f.watcher = w
	watchCtx, cancel := context.WithCancel(ctx)
	DeferCleanup(func() { cancel(); <-w.done })
	go w.run(watchCtx)
	return w
}

func (w *pruneWatcher) run(ctx context.Context) {
	defer GinkgoRecover()
	defer close(w.done)
	oldVersion := strings.TrimPrefix(w.oldAPIVersion, w.group+"/")
	// check looks at one state of the CRD; true once pruned.
	check := func(obj *unstructured.Unstructured) bool {
		stored, _, _ := unstructured.NestedStringSlice(obj.Object, "status", "storedVersions")
		if len(stored) == 0 || slices.Contains(stored, oldVersion) {
			return false
		}
		at := time.Now()
		versions, err := etcd.APIVersions(context.WithoutCancel(ctx), w.group, w.plural)
		old := 0
		for _, v := range versions {
			if v == w.oldAPIVersion {
				old++
			}
		}
		w.mu.Lock()
		w.prunedAt, w.oldAtPrune, w.err = at, old, err
		w.mu.Unlock()
		return true
	}
	// Until the first state that is pruned.
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	envtestutil.WatchNamed(watchCtx, dyn, envtestutil.CRDResource, w.crdName, func(obj *unstructured.Unstructured) {
		if check(obj) {
			cancel()
		}
	})
}

// result is when the old version was pruned and how many objects etcd still
// held in it at that moment; -1 when not pruned (yet).
func (w *pruneWatcher) result() (time.Time, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ExpectWithOffset(1, w.err).NotTo(HaveOccurred(), "reading etcd when storedVersions was pruned")
	return w.prunedAt, w.oldAtPrune
}

// oldAtPrune is the count of result, without assertions, for the figures.
func (w *pruneWatcher) oldAtPruneCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.oldAtPrune
}

// expectPrunedClean asserts that the watcher saw the prune and that no
// object was left in the old version at that moment; it records the count
// in f first, so that the figures show it even when it fails.
func (w *pruneWatcher) expectPrunedClean(f *figures) {
	EventuallyWithOffset(1, func() int { _, n := w.result(); return n }).WithTimeout(10*time.Second).
		ShouldNot(Equal(-1), "the watcher saw storedVersions lose %s", w.oldAPIVersion)
	_, f.OldAtPrune = w.result()
	ExpectWithOffset(1, f.OldAtPrune).To(BeZero(),
		"objects still stored as %s in etcd when status.storedVersions was pruned", w.oldAPIVersion)
}

// ---------------------------------------------------------------------------
// The writer.

// writer keeps updating a set of objects with merge patches that carry a
// counter in an annotation, and records per object the last value it got a
// 2xx for and the last value it sent.
type writer struct {
	gvr     schema.GroupVersionResource
	names   []string
	acked   []atomic.Int64
	sent    []atomic.Int64
	updates atomic.Int64
	errors  atomic.Int64
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

const writerAnnotation = "faults.graduator.io/counter"

// startWriter patches the named objects round-robin on 2 goroutines, each
// object owned by one goroutine, every interval per goroutine, until stop.
func startWriter(ctx context.Context, gvrs []schema.GroupVersionResource, names []string, interval time.Duration) *writer {
	w := &writer{gvr: gvrs[0], names: names, acked: make([]atomic.Int64, len(names)), sent: make([]atomic.Int64, len(names))}
	writeCtx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	DeferCleanup(w.stop)
	const goroutines = 2
	for g := range goroutines {
		w.wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer w.wg.Done()
			ticker := time.NewTicker(interval)
			defer ticker.Stop()
			for round := 0; ; round++ {
				for i := g; i < len(names); i += goroutines {
					select {
					case <-writeCtx.Done():
						return
					case <-ticker.C:
					}
					value := w.sent[i].Add(1)
					patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, writerAnnotation, strconv.FormatInt(value, 10))
					// Alternate the version written through.
					gvr := gvrs[(round+i)%len(gvrs)]
					reqCtx, cancelReq := context.WithTimeout(writeCtx, 10*time.Second)
					_, err := dyn.Resource(gvr).Namespace("default").Patch(reqCtx, names[i], types.MergePatchType, patch, metav1.PatchOptions{})
					cancelReq()
					if err == nil {
						w.acked[i].Store(value)
						w.updates.Add(1)
					} else if writeCtx.Err() == nil {
						w.errors.Add(1)
					}
				}
			}
		}()
	}
	return w
}

func (w *writer) stop() {
	w.cancel()
	w.wg.Wait()
}

// lost reads every written object and counts those whose annotation is
// older than the last acknowledged write. A write that failed without an
// answer may or may not have landed, so a value up to the last one sent is
// fine; anything else is reported.
func (w *writer) lost(ctx context.Context) (int, []string) {
	list, err := dyn.Resource(w.gvr).Namespace("default").List(ctx, metav1.ListOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	got := map[string]int64{}
	for _, item := range list.Items {
		v, _ := strconv.ParseInt(item.GetAnnotations()[writerAnnotation], 10, 64)
		got[item.GetName()] = v
	}
	lost := 0
	var examples []string
	for i, name := range w.names {
		v, acked, sent := got[name], w.acked[i].Load(), w.sent[i].Load()
		if v < acked || v > sent {
			lost++
			if len(examples) < 5 {
				examples = append(examples, fmt.Sprintf("%s: stored %d, last acknowledged %d, last sent %d", name, v, acked, sent))
			}
		}
	}
	return lost, examples
}

// ---------------------------------------------------------------------------
// The audit log.

type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		APIGroup    string `json:"apiGroup"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp metav1.MicroTime `json:"requestReceivedTimestamp"`
}

// managerPatches returns the PATCH requests of the manager to objects of the
// group's resource received at or after since, from the audit log.
func managerPatches(group, resource string, since time.Time) ([]auditEvent, error) {
	f, err := os.Open(auditLog)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []auditEvent
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<22)
	for scanner.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(scanner.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log line %q: %w", scanner.Text(), err)
		}
		if ev.Verb == "patch" && ev.User.Username == managerUser && ev.ObjectRef.APIGroup == group &&
			ev.ObjectRef.Resource == resource && !ev.RequestReceivedTimestamp.Time.Before(since) {
			out = append(out, ev)
		}
	}
	return out, scanner.Err()
}

// ---------------------------------------------------------------------------
// Figures.

// figures are what one scenario measured; the summary line and the table of
// docs/reliability.md print them.
type figures struct {
	Scenario string
	Objects  int
	// Kills is every SIGKILL; KillsMidRun those that landed while the
	// migration was running (run started, not complete, objects still in
	// the old version).
	Kills, KillsMidRun int
	// ManagerRestarts counts managers that exited on their own and were
	// restarted by the supervisor.
	ManagerRestarts int
	Updates         int64
	UpdatesLost     int
	// OldAtPrune is the number of objects etcd held in the old version when
	// storedVersions was pruned; -1 when it was not pruned.
	OldAtPrune   int
	FaultToReady time.Duration
	Duration     time.Duration
	Passed       bool
	Note         string
	// watcher, when set, fills OldAtPrune for the figures even when the
	// spec failed before reading it.
	watcher *pruneWatcher
}

var (
	figuresMu  sync.Mutex
	allFigures []*figures
)

// record starts the figures of the current spec; they are printed when the
// spec ends, passed or not.
func record(scenario string) *figures {
	f := &figures{Scenario: scenario, Objects: size.objects, OldAtPrune: -1, FaultToReady: -1}
	start := time.Now()
	DeferCleanup(func() {
		f.Duration = time.Since(start)
		f.Passed = !CurrentSpecReport().Failed()
		if f.watcher != nil && f.OldAtPrune < 0 {
			f.OldAtPrune = f.watcher.oldAtPruneCount()
		}
		figuresMu.Lock()
		allFigures = append(allFigures, f)
		figuresMu.Unlock()
		AddReportEntry("summary", f.summary(), ReportEntryVisibilityAlways)
	})
	return f
}

func (f *figures) summary() string {
	result := "PASS"
	if !f.Passed {
		result = "FAIL"
	}
	return fmt.Sprintf("FAULTS %s [%s] %s: objects=%d kills_mid_run=%d/%d manager_restarts=%d updates=%d updates_lost=%d "+
		"old_at_prune=%s fault_to_ready=%s duration=%s%s",
		size.name, result, f.Scenario, f.Objects, f.KillsMidRun, f.Kills, f.ManagerRestarts, f.Updates, f.UpdatesLost,
		orDash(f.OldAtPrune), durationOrDash(f.FaultToReady), f.Duration.Round(time.Second), noteSuffix(f.Note))
}

func orDash(n int) string {
	if n < 0 {
		return "not pruned"
	}
	return strconv.Itoa(n)
}

func durationOrDash(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return d.Round(100 * time.Millisecond).String()
}

func noteSuffix(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// writeFigures prints every summary line and, for a full run, writes the
// table into docs/reliability.md between the markers.
func writeFigures(report Report) {
	figuresMu.Lock()
	defer figuresMu.Unlock()
	if len(allFigures) == 0 {
		return
	}
	fmt.Println()
	for _, f := range allFigures {
		fmt.Println(f.summary())
	}
	if size.name != "full" || os.Getenv("FAULTS_RECORD") == "0" {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Full run, suite %s in %s.\n\n", passFail(report.SuiteSucceeded), report.RunTime.Round(time.Second))
	b.WriteString("| scenario | result | objects | SIGKILLs mid-run / all | manager restarts | writer updates | updates lost | objects in old version at prune | last fault to Ready | duration | notes |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, f := range allFigures {
		fmt.Fprintf(&b, "| %s | %s | %d | %d / %d | %d | %d | %d | %s | %s | %s | %s |\n", f.Scenario, passFail(f.Passed),
			f.Objects, f.KillsMidRun, f.Kills, f.ManagerRestarts, f.Updates, f.UpdatesLost, orDash(f.OldAtPrune),
			durationOrDash(f.FaultToReady), f.Duration.Round(time.Second), f.Note)
	}
	path := filepath.Join("..", "..", "docs", "reliability.md")
	stamp := docfigures.NewStamp("make test-faults")
	stamp.Date = report.StartTime.UTC()
	Expect(docfigures.Write(path, "FAULT FIGURES", stamp, b.String())).To(Succeed(), "a full run records its figures (FAULTS_RECORD=0 to not)")
	fmt.Printf("figures written to %s\n", path)
}

func passFail(ok bool) string {
	if ok {
		return "pass"
	}
	return "FAIL"
}

// ---------------------------------------------------------------------------
// The phase recorder.

// phaseRecorder records every phase a policy shows, from a watch, so that a
// spec can check the phase never moved backwards (a graduated run resumed),
// however briefly.
type phaseRecorder struct {
	name   string
	mu     sync.Mutex
	phases []graduatorv1alpha1.Phase
	done   chan struct{}
}

var policyResource = graduatorv1alpha1.GroupVersion.WithResource("crdversionpolicies")

func startPhaseRecorder(ctx context.Context, name string) *phaseRecorder {
	p := &phaseRecorder{name: name, done: make(chan struct{})}
	watchCtx, cancel := context.WithCancel(ctx)
	DeferCleanup(func() { cancel(); <-p.done })
	go p.run(watchCtx)
	return p
}

func (p *phaseRecorder) see(obj *unstructured.Unstructured) {
	phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
	p.mu.Lock()
	defer p.mu.Unlock()
	if phase != "" && (len(p.phases) == 0 || p.phases[len(p.phases)-1] != graduatorv1alpha1.Phase(phase)) {
		p.phases = append(p.phases, graduatorv1alpha1.Phase(phase))
	}
}

func (p *phaseRecorder) run(ctx context.Context) {
	defer GinkgoRecover()
	defer close(p.done)
	envtestutil.WatchNamed(ctx, dyn, policyResource, p.name, p.see)
}

// phaseOrder ranks the phases a graduation passes through; Blocked is a
// stall that may come at any step, so it has no rank.
var phaseOrder = map[graduatorv1alpha1.Phase]int{
	graduatorv1alpha1.PhasePending: 0, graduatorv1alpha1.PhasePreflight: 1, graduatorv1alpha1.PhaseSwitchingStorage: 2,
	graduatorv1alpha1.PhaseMigrating: 3, graduatorv1alpha1.PhasePruning: 4, graduatorv1alpha1.PhaseRetiring: 5,
	graduatorv1alpha1.PhaseGraduated: 6,
}

// expectMonotonic watches a few seconds more (a graduated policy that
// resumes its run does so within a second), then checks that no phase came
// after a later one.
func (p *phaseRecorder) expectMonotonic() {
	time.Sleep(5 * time.Second)
	p.mu.Lock()
	defer p.mu.Unlock()
	highest := -1
	for i, phase := range p.phases {
		rank, ranked := phaseOrder[phase]
		if !ranked {
			continue
		}
		ExpectWithOffset(1, rank).To(BeNumerically(">=", highest),
			"policy %s went back to %s after a later phase: %v", p.name, phase, p.phases[:i+1])
		highest = max(highest, rank)
	}
}
