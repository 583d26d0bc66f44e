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
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/driver"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/robustness"
)

// ---------------------------------------------------------------------------
// Invariant 2: the storage guard.

// storageGuard WATCHes the CRD and, at every state of it, reads etcd: an
// object stored in a version status.storedVersions no longer lists is a
// violation. Objects only ever move out of the old version, so reading
// etcd just after the CRD changed can only undercount what was left then.
type storageGuard struct {
	mu    sync.Mutex
	found []string
	done  chan struct{}
}

func startStorageGuard(ctx context.Context) *storageGuard {
	g := &storageGuard{done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(g.done)
		envtestutil.WatchNamed(ctx, dyn, envtestutil.CRDResource, pizzaCRD, g.check)
	}()
	return g
}

func (g *storageGuard) check(crd *unstructured.Unstructured) {
	stored, _, _ := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
	if len(stored) == 0 {
		return
	}
	versions, err := etcd.APIVersions(context.Background(), pizzaGroup, "pizzas")
	if err != nil {
		g.add(fmt.Sprintf("reading etcd at storedVersions %v: %v", stored, err))
		return
	}
	outside := map[string]int{}
	for _, v := range versions {
		if !slices.Contains(stored, strings.TrimPrefix(v, pizzaGroup+"/")) {
			outside[v]++
		}
	}
	for v, n := range outside {
		g.add(fmt.Sprintf("storedVersions %v (CRD resourceVersion %s) while etcd held %d objects as %s",
			stored, crd.GetResourceVersion(), n, v))
	}
}

func (g *storageGuard) add(s string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !slices.Contains(g.found, s) { // a relist shows the same state again
		g.found = append(g.found, s)
	}
}

func (g *storageGuard) violations() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.found)
}

func (g *storageGuard) wait() { <-g.done }

// ---------------------------------------------------------------------------
// Invariant 3: the policy's phases, and its status for the stages.

// policyWatch records every phase the policy shows, and its latest status.
type policyWatch struct {
	mu     sync.Mutex
	phases []seenPhase
	latest *graduatorv1alpha1.CRDVersionPolicyStatus
	// latestRV is the resourceVersion of latest; markRV that of the last
	// mark: a Ready from before the mark is the first graduation's.
	latestRV, markRV int64
	done             chan struct{}
}

// seenPhase is a phase the policy showed, or a mark the run put (the CRD's
// storage version set back), at a resourceVersion: envtest's one etcd
// numbers the policy's and the CRD's revisions alike, so a status the
// operator wrote before the CRD changed sorts before the mark even when
// its event comes after.
type seenPhase struct {
	rv    int64
	phase graduatorv1alpha1.Phase
}

// startPolicyWatch watches the policy; embedded, the graduation's state
// crdmigrate keeps in the CRD's annotation (driver.StateAnnotation).
func startPolicyWatch(ctx context.Context, embedded bool) *policyWatch {
	w := &policyWatch{done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(w.done)
		if embedded {
			envtestutil.WatchNamed(ctx, dyn, envtestutil.CRDResource, pizzaCRD, w.seeAnnotation)
			return
		}
		envtestutil.WatchNamed(ctx, dyn, graduatorv1alpha1.GroupVersion.WithResource("crdversionpolicies"), pizzaCRD, w.see)
	}()
	return w
}

// seeAnnotation reads the graduation's state in the CRD's annotation.
func (w *policyWatch) seeAnnotation(crd *unstructured.Unstructured) {
	raw := crd.GetAnnotations()[driver.StateAnnotation]
	if raw == "" {
		return
	}
	var status graduatorv1alpha1.CRDVersionPolicyStatus
	if json.Unmarshal([]byte(raw), &status) != nil {
		return
	}
	p := graduatorv1alpha1.CRDVersionPolicy{Status: status}
	p.ResourceVersion = crd.GetResourceVersion()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&p)
	if err != nil {
		return
	}
	w.see(&unstructured.Unstructured{Object: obj})
}

func (w *policyWatch) see(obj *unstructured.Unstructured) {
	var p graduatorv1alpha1.CRDVersionPolicy
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &p); err != nil {
		return
	}
	rv, _ := strconv.ParseInt(p.ResourceVersion, 10, 64)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.latest, w.latestRV = &p.Status, max(w.latestRV, rv)
	if phase := p.Status.Phase; phase != "" {
		w.phases = append(w.phases, seenPhase{rv: rv, phase: phase})
	}
}

// mark puts robustness.StorageSetBack in the log at the CRD's
// resourceVersion rv.
func (w *policyWatch) mark(rv string) {
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		Fail(fmt.Sprintf("the CRD's resourceVersion %q: %v", rv, err))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.phases = append(w.phases, seenPhase{rv: n, phase: robustness.StorageSetBack})
	w.markRV = max(w.markRV, n)
}

func (w *policyWatch) status() *graduatorv1alpha1.CRDVersionPolicyStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latest
}

// handled is how many objects the run saved as handled.
func (w *policyWatch) handled() int64 {
	s := w.status()
	if s == nil || s.Migration == nil {
		return 0
	}
	return s.Migration.Rewritten + s.Migration.Skipped + s.Migration.Failed
}

// ready tells whether the policy is Ready, in a state written after the
// last mark.
func (w *policyWatch) ready() bool {
	w.mu.Lock()
	s, fresh := w.latest, w.latestRV > w.markRV
	w.mu.Unlock()
	if s == nil || !fresh {
		return false
	}
	c := meta.FindStatusCondition(s.Conditions, graduatorv1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue
}

// phaseLog is the phases in the order of their resourceVersions (a relist
// shows a state again: once each), the marks among them.
func (w *policyWatch) phaseLog() []graduatorv1alpha1.Phase {
	w.mu.Lock()
	seen := slices.Clone(w.phases)
	w.mu.Unlock()
	slices.SortStableFunc(seen, func(a, b seenPhase) int { return cmp.Compare(a.rv, b.rv) })
	var out []graduatorv1alpha1.Phase
	for _, s := range seen {
		if len(out) == 0 || out[len(out)-1] != s.phase {
			out = append(out, s.phase)
		}
	}
	return out
}

func (w *policyWatch) wait() { <-w.done }

// ---------------------------------------------------------------------------
// The stage of the run.

// stageTracker tells the run's stage from the manager's log (its "step
// started" lines, JSON), the manager's dry-run writes in the API server's
// audit log, and the policy's status, reading both logs as they grow.
type stageTracker struct {
	policy *policyWatch

	mu sync.Mutex
	// logs are the replicas' logs; the step the latest line says started
	// is the run's.
	logs        []*followedLog
	auditOffset int64
	lastStep    string
	stepStart   time.Time
	switched    bool
	dryRuns     int
	// cleanupAt is when the first managedFields cleanup started (zero:
	// not yet).
	cleanupAt time.Time
}

// followedLog is a log file read as it grows.
type followedLog struct {
	path    string
	offset  int64
	partial []byte
}

// startStageTracker follows the managers' logs at paths, and the audit log
// from auditOffset; switched: the storage was switched before the run (an
// embedded one).
func startStageTracker(paths []string, auditOffset int64, policy *policyWatch, switched bool) *stageTracker {
	t := &stageTracker{policy: policy, auditOffset: auditOffset, switched: switched}
	for _, p := range paths {
		t.logs = append(t.logs, &followedLog{path: p})
	}
	return t
}

func (t *stageTracker) current() robustness.Stage {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.readNew()
	t.readAudit()
	return robustness.StageOf(t.lastStep, t.switched, t.dryRuns, t.policy.status())
}

// readAudit counts the manager's dry-run writes since the last step started.
func (t *stageTracker) readAudit() {
	writes, offset, err := audit.WritesFrom(pizzaGroup, "pizzas", t.auditOffset)
	if err != nil {
		return
	}
	t.auditOffset = offset
	for _, w := range writes {
		if w.User == managerUser && w.DryRun && !w.Received.Before(t.stepStart) {
			t.dryRuns++
		}
	}
}

// readNew reads the lines the managers wrote since the last call.
func (t *stageTracker) readNew() {
	for _, l := range t.logs {
		t.readLines(l.newLines())
	}
}

// newLines returns the complete lines written since the last call.
func (l *followedLog) newLines() [][]byte {
	f, err := os.Open(l.path)
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(l.offset, io.SeekStart); err != nil {
		return nil
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil
	}
	l.offset += int64(len(data))
	data = append(l.partial, data...)
	last := bytes.LastIndexByte(data, '\n')
	if last < 0 {
		l.partial = data
		return nil
	}
	l.partial = slices.Clone(data[last+1:])
	return bytes.Split(data[:last], []byte("\n"))
}

// readLines takes the "step started" lines; a line older than the step
// already seen (another replica's log, read later) does not move it back.
func (t *stageTracker) readLines(lines [][]byte) {
	for _, line := range lines {
		if !bytes.Contains(line, []byte(`"step started"`)) {
			continue
		}
		var entry struct {
			Msg  string          `json:"msg"`
			Step string          `json:"step"`
			TS   json.RawMessage `json:"ts"`
		}
		if json.Unmarshal(line, &entry) != nil || entry.Msg != "step started" {
			continue
		}
		at := logTime(entry.TS)
		t.switched = t.switched || entry.Step == "SwitchStorage"
		if entry.Step == "CleanupManagedFields" && (t.cleanupAt.IsZero() || at.Before(t.cleanupAt)) {
			t.cleanupAt = at
		}
		if at.Before(t.stepStart) {
			continue
		}
		t.lastStep, t.stepStart, t.dryRuns = entry.Step, at, 0
	}
}

// logTime reads zap's "ts": seconds since the epoch, or RFC 3339.
func logTime(ts json.RawMessage) time.Time {
	var seconds float64
	if json.Unmarshal(ts, &seconds) == nil {
		return time.Unix(0, int64(seconds*float64(time.Second)))
	}
	var text string
	if json.Unmarshal(ts, &text) == nil {
		if t, err := time.Parse(time.RFC3339Nano, text); err == nil {
			return t
		}
	}
	return time.Time{}
}

// cleanupStarted is when the managedFields cleanup first started; zero
// when it did not.
func (t *stageTracker) cleanupStarted() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.readNew()
	return t.cleanupAt
}

func (t *stageTracker) wait() {}

// sortedKeys is for messages.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
