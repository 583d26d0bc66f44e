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

package driver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/log"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/apiservers"
	"github.com/graduator/graduator/internal/enginehook"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/migration"
)

// ErrPolicyChanged, like migration.ErrCRDChanged, stops a run whose premise
// no longer holds; the next plan decides, on fresh reads, whether it
// resumes, restarts or stops.
var ErrPolicyChanged = errors.New("the policy was changed, paused or deleted")

// Interrupt stops the running migration of the policy named name between
// two writes, for why (migration.ErrCRDChanged, ErrPolicyChanged). A door calls it
// from its watches: a run learns of a change at once, not only at its next
// page.
func (d *Driver) Interrupt(name string, why error) { d.runs.interrupt(name, why) }

// migrate runs or resumes the storage migration, saving its progress in the
// store after every page so that a restarted door resumes from the last
// saved continue token.
func (d *Driver) migrate(ctx context.Context, g *run, step graduation.Step) error {
	policy, crd := g.policy, g.crd
	logger := log.FromContext(ctx)
	r := policy.Status.Migration
	if step.Restart || r == nil {
		started := metav1.NewTime(d.now())
		prev := r
		r = nextRun(prev, crd, step.StorageVersion, &started)
		recordServers(r, g)
		policy.Status.Migration = r
		logger.Info("starting a migration run", "checkpoint", r.ResourceVersion, "keptFromLastRun", r.ResourceVersion != "",
			"lastRun", lastRunOf(prev), "crdGeneration", crd.Generation)
		d.Reporter.Event(policy, crd, corev1.EventTypeNormal, ReasonMigrationStarted, "Migrate",
			fmt.Sprintf("rewriting every %s as %s", crd.Spec.Names.Plural, step.StorageVersion))
	} else {
		logger.Info("resuming the migration", "continue", r.ContinueToken != "", "listed", r.Listed)
	}

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	d.runs.start(policy.Name, cancel)
	defer d.runs.done(policy.Name)
	m := d.metrics()
	m.RunStarted(crd.Name)
	defer m.RunEnded(crd.Name)
	pages := &pageHandler{d: d, g: g, step: step, status: r, metrics: m, counted: progressOf(r), cancel: cancel}
	opts := d.engineOptions(policy.Spec.Migration, graduation.ResourceAt(crd, step.StorageVersion), progressOf(r))
	opts.WriteVersions = writeVersions(crd, step.StorageVersion, policy.Spec.Migration.WriteTo)
	pages.door = opts.OnProgress
	opts.OnProgress = func(p migration.Progress) { pages.handle(ctx, p) }
	result, err := migration.Run(d.engineHook(runCtx), d.Dynamic, opts)
	pages.count(result.Progress)
	recordProgress(r, result.Progress)
	if result.Complete {
		m.Progressed(crd.Name, result.Writers, 1)
	}
	if why := context.Cause(runCtx); errors.Is(why, migration.ErrCRDChanged) || errors.Is(why, ErrPolicyChanged) {
		// The CRD or the policy changed: the next plan decides what follows.
		logger.Info("migration interrupted", "reason", why.Error())
		return nil
	} else if why != nil && ctx.Err() == nil {
		err = why // a check between pages failed
	}
	if err != nil {
		return fmt.Errorf("migrate %s to %s: %w", crd.Name, step.StorageVersion, err)
	}
	if result.Complete {
		d.completed(g, step.StorageVersion)
	}
	return nil
}

// pageHandler is what follows each page of a run: the metrics, the status
// and its conditions, the save, the door's own callback, and the checks
// that stop a run between two pages.
type pageHandler struct {
	d      *Driver
	g      *run
	step   graduation.Step
	status *graduatorv1alpha1.MigrationStatus
	// metrics, and the counts they were told so far: the engine reports
	// totals, the metrics take increments.
	metrics Metrics
	counted migration.Progress
	// door is the door's own progress callback (nil: none).
	door   func(migration.Progress)
	cancel context.CancelCauseFunc
}

func (h *pageHandler) handle(ctx context.Context, p migration.Progress) {
	h.count(p)
	h.metrics.Progressed(h.g.crd.Name, p.Writers, p.Fraction())
	h.record(p)
	if err := h.g.store.Save(ctx, h.g.policy); apierrors.IsConflict(err) {
		// Another writer's status is newer than ours: stop rather than go
		// on from a past the status no longer shows.
		h.cancel(fmt.Errorf("save the migration's progress: %w", err))
		return
	} else if err != nil {
		// The next page saves it again; the run goes on.
		log.FromContext(ctx).Error(err, "saving migration progress")
	}
	if h.door != nil {
		h.door(p)
	}
	if why := h.d.invalidated(ctx, h.g, h.status); why != nil {
		h.cancel(why)
	}
}

// count tells the metrics what p adds to what they were told.
func (h *pageHandler) count(p migration.Progress) {
	c := &h.counted
	h.metrics.Counted(h.g.crd.Name, p.Rewritten-c.Rewritten, p.Skipped-c.Skipped, p.Failed-c.Failed)
	c.Rewritten, c.Skipped, c.Failed = max(c.Rewritten, p.Rewritten), max(c.Skipped, p.Skipped), max(c.Failed, p.Failed)
}

// record puts p in the status, and the plan's conditions with it: objects
// rejected so far show in Ready at once, not only when the run ends. A page
// went through, so a stall is over (Attempts 0): the run moves again.
func (h *pageHandler) record(p migration.Progress) {
	waiting := h.status.CompactionWait
	recordProgress(h.status, p)
	h.d.waitStarted(h.g, p, waiting)
	now := h.d.now()
	in := graduation.Input{CRD: h.g.crd, Policy: h.g.policy, Now: now, StorageSettled: true}
	h.d.recovered(h.g, in, h.step)
	h.d.record(h.g, graduation.Plan(in), now)
}

// nextRun is the status of a new run to version on crd, after prev (nil:
// none). It keeps prev's checkpoint and the ranges prev wrote when they
// still tell the truth about crd's objects: the checkpoint was taken once
// the switch to version had settled, so what is newer is stored in version,
// and what the run wrote itself needs no write again. That holds
//
//   - for a retry of a run that ended with failures, on the same CRD
//     generation and version: without it the retry rewrites every object
//     again, and a run under faults ends near 2.4 writes per object;
//   - across exactly one edit of the CRD's spec that left the storage
//     version at version, such as a version added: without it the run
//     starts afresh, near 1.9 writes per object. One edit cannot set the storage version elsewhere and back,
//     so nothing was stored in another version in between; two edits
//     could (set back, then forward again: objects written in between are
//     newer than the checkpoint yet stored in the old version), and start
//     afresh;
//
// and only for the CRD the run started on: a CRD deleted and created again
// since has generations of its own.
func nextRun(prev *graduatorv1alpha1.MigrationStatus, crd *apiextensionsv1.CustomResourceDefinition, version string, started *metav1.Time) *graduatorv1alpha1.MigrationStatus {
	next := &graduatorv1alpha1.MigrationStatus{CRDGeneration: crd.Generation, StorageVersion: version, StartedAt: started}
	if prev != nil {
		// What the last run's writes did to etcd's space holds whatever
		// the CRD did since: it is etcd's, not the objects'.
		next.Space = prev.Space.DeepCopy()
	}
	if prev == nil || prev.StorageVersion != version || prev.ResourceVersion == "" || prev.StartedAt == nil ||
		!crd.CreationTimestamp.Before(prev.StartedAt) {
		return next
	}
	retry := prev.CRDGeneration == crd.Generation && prev.CompletedAt != nil && prev.Failed > 0
	oneEdit := prev.CRDGeneration+1 == crd.Generation
	if retry || oneEdit {
		next.ResourceVersion, next.WrittenRanges = prev.ResourceVersion, prev.WrittenRanges
	}
	return next
}

// recordServers keeps, in a new run's status, the API servers the plan
// found agreeing before its first write, and how they were checked: the
// prune asks them again, and one not among them restarts the run.
func recordServers(r *graduatorv1alpha1.MigrationStatus, g *run) {
	if g.servers.State == apiservers.Agree {
		r.APIServers = g.servers.Servers
	}
	r.APIServersCheck = truncate(graduation.ServersChecked(g.servers, graduation.SettleDelay(g.policy.Spec.Migration)), maxStatusText)
}

// lastRunOf describes the run a new one follows, for the log.
func lastRunOf(r *graduatorv1alpha1.MigrationStatus) string {
	if r == nil {
		return "none"
	}
	return fmt.Sprintf("generation %d, storage %s, checkpoint %q, completed %t, failed %d, started %v",
		r.CRDGeneration, r.StorageVersion, r.ResourceVersion, r.CompletedAt != nil, r.Failed, r.StartedAt)
}

// engineOptions are the engine's options for a run of the policy's
// migration, resuming from resume: the door's (Driver.Engine), or the
// policy's tuning when the door has none.
func (d *Driver) engineOptions(settings graduatorv1alpha1.MigrationSettings, resource schema.GroupVersionResource, resume migration.Progress) migration.Options {
	opts := policyTuning(settings)
	if d.Engine != nil {
		opts = *d.Engine
	}
	opts.Resource, opts.Config, opts.Resume = resource, d.Config, resume
	// The policy's: the preflight and the access check read it there.
	opts.WriteTo = settings.WriteTo
	opts.EtcdQuota = settings.EtcdQuotaBytes(d.EtcdQuota)
	return opts
}

// engineHook is ctx telling the engine where this door tells etcd's quota,
// beside what ctx already tells it (a measurement's knobs).
func (d *Driver) engineHook(ctx context.Context) context.Context {
	h := enginehook.From(ctx)
	h.QuotaSetting = cmp.Or(d.EtcdQuotaSetting, PolicyEtcdQuotaSetting)
	return enginehook.With(ctx, h)
}

// writeVersions are the old versions the engine may send a write at
// (migration.Options.WriteVersions): the one old version objects may still
// be stored in, when it is served and a conversion webhook converts. With
// one old version an object is stored either in it (the write converts it
// to storage exactly as the preflight's round-trip proof did) or already in
// storage; with two, a write at one could convert an object stored in the
// other through it, a path no proof covers. Writes to /status need the old
// version to have that subresource too.
func writeVersions(crd *apiextensionsv1.CustomResourceDefinition, storage string, writeTo graduatorv1alpha1.WriteTarget) []string {
	if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
		return nil
	}
	var old []string
	for _, v := range crd.Status.StoredVersions {
		if v != storage {
			old = append(old, v)
		}
	}
	if len(old) != 1 || !slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
		return v.Name == old[0] && v.Served &&
			(len(writeTo.Subresources()) == 0 || v.Subresources != nil && v.Subresources.Status != nil)
	}) {
		return nil
	}
	return old
}

// policyTuning is the engine's tuning a policy's spec.migration sets: the
// one conversion between the API's form and the engine's.
func policyTuning(s graduatorv1alpha1.MigrationSettings) migration.Options {
	return migration.Options{
		Concurrency: int(s.Concurrency),
		PageSize:    s.PageSize,
		QPS:         float32(s.QPS),
		Priority:    migration.Priority(s.Priority),
	}
}

// PolicyEtcdQuotaSetting is where a policy tells etcd's quota.
const PolicyEtcdQuotaSetting = "the policy's spec.migration.etcdQuota (the chart's etcdQuota, for every policy)"

// waitStarted tells, with an Event, that the run's first wait for etcd's
// compaction started: the status says it too, while it lasts.
func (d *Driver) waitStarted(g *run, p migration.Progress, before string) {
	if p.CompactionWait == "" || before != "" || p.CompactionWaits != 1 {
		return
	}
	d.Reporter.Event(g.policy, g.crd, corev1.EventTypeNormal, ReasonWaitingForCompaction, "Migrate", p.CompactionWait)
}

// completed records the end of a run that reached the end of the listing.
func (d *Driver) completed(g *run, target string) {
	policy, crd, r := g.policy, g.crd, g.policy.Status.Migration
	done := metav1.NewTime(d.now())
	r.CompletedAt = &done
	r.ContinueToken = ""
	d.metrics().Completed(crd.Name, done.Sub(r.StartedAt.Time))
	eventType, reason := corev1.EventTypeNormal, ReasonMigrationCompleted
	if r.Failed > 0 {
		eventType, reason = corev1.EventTypeWarning, ReasonMigrationFailed
	}
	d.Reporter.Event(policy, crd, eventType, reason, "Migrate", fmt.Sprintf("%d %s rewritten as %s, %d skipped, %d failed",
		r.Rewritten, crd.Spec.Names.Plural, target, r.Skipped, r.Failed))
}

// invalidated checks, between pages, that the run still migrates the right
// thing: the CRD generation and storage version it started on, and a policy
// that is neither paused nor retargeted. A door's watches interrupt a run at
// once (Interrupt); this check also covers an event a watch missed. A read
// that fails stops the run too: it cannot be known to be right.
func (d *Driver) invalidated(ctx context.Context, g *run, r *graduatorv1alpha1.MigrationStatus) error {
	crd, err := d.getCRD(ctx, g.policy.Name)
	if err != nil {
		return err
	}
	if crd == nil || crd.Generation != r.CRDGeneration || graduation.StorageVersion(crd) != r.StorageVersion {
		return migration.ErrCRDChanged
	}
	current, err := g.store.Load(ctx)
	if err != nil {
		return fmt.Errorf("reread policy %s: %w", g.policy.Name, err)
	}
	if current == nil || current.Generation != g.policy.Generation {
		return ErrPolicyChanged
	}
	return nil
}

func progressOf(r *graduatorv1alpha1.MigrationStatus) migration.Progress {
	p := migration.Progress{
		Checkpoint:        r.ResourceVersion,
		Continue:          r.ContinueToken,
		CatchUp:           r.CatchUp,
		CatchUpCheckpoint: r.CatchUpResourceVersion,
		CaughtUp:          r.CaughtUp,
		Listed:            r.Listed,
		Rewritten:         r.Rewritten,
		Skipped:           r.Skipped,
		Failed:            r.Failed,
		Written:           r.WrittenRanges,
		Space:             ledgerOf(r.Space),
	}
	p.SweepMode, p.SweepReason = sweepFrom(r.Sweep)
	for _, f := range r.Failures {
		p.Failures = append(p.Failures, migration.Failure{Namespace: f.Namespace, Name: f.Name, Reason: f.Reason})
	}
	return p
}

// maxFailureReason keeps an object's error in the status without letting a
// long webhook answer fill it.
const maxFailureReason = 1000

func recordProgress(r *graduatorv1alpha1.MigrationStatus, p migration.Progress) {
	r.ResourceVersion = p.Checkpoint
	r.ContinueToken = p.Continue
	r.CatchUp, r.CatchUpResourceVersion, r.CaughtUp = p.CatchUp, p.CatchUpCheckpoint, p.CaughtUp
	r.Sweep = sweepOf(p)
	r.Writers, r.WritersReason = int32(p.Writers), string(p.WritersReason)
	r.Listed, r.Rewritten, r.Skipped, r.Failed = p.Listed, p.Rewritten, p.Skipped, p.Failed
	r.Progress = fmt.Sprintf("%d/%d", p.Done(), p.Listed)
	r.WrittenRanges = p.Written
	r.SpaceBudget, r.CompactionWait = truncate(p.SpaceBudgetReason, maxStatusText), truncate(p.CompactionWait, maxStatusText)
	r.Space = ledgerStatus(p.Space)
	r.Failures = nil
	for _, f := range p.Failures {
		reason := f.Reason
		if len(reason) > maxFailureReason {
			reason = reason[:maxFailureReason] + "..."
		}
		r.Failures = append(r.Failures, graduatorv1alpha1.MigrationFailure{Namespace: f.Namespace, Name: f.Name, Reason: reason})
	}
}

// maxSweep keeps the sweep's reason within the status field's bound;
// maxStatusText the space budget's and the compaction wait's.
const maxSweep, maxStatusText = 512, 512

// truncate bounds s to n bytes for a status field of that bound.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// sweepOf is Progress.SweepMode and its reason as the status says them.
func sweepOf(p migration.Progress) string {
	if p.SweepMode == "" {
		return ""
	}
	s := string(p.SweepMode) + ": " + p.SweepReason
	if len(s) > maxSweep {
		s = s[:maxSweep-3] + "..."
	}
	return s
}

// sweepFrom reads sweepOf's text back.
func sweepFrom(s string) (migration.SweepMode, string) {
	mode, reason, _ := strings.Cut(s, ": ")
	return migration.SweepMode(mode), reason
}

// runningMigrations holds the cancel function of each policy's running
// migration, so that an event can stop it between two writes.
type runningMigrations struct {
	mu     sync.Mutex
	cancel map[string]context.CancelCauseFunc
}

func (m *runningMigrations) start(name string, cancel context.CancelCauseFunc) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cancel == nil {
		m.cancel = map[string]context.CancelCauseFunc{}
	}
	m.cancel[name] = cancel
}

func (m *runningMigrations) done(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.cancel, name)
}

func (m *runningMigrations) interrupt(name string, why error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cancel, ok := m.cancel[name]; ok {
		cancel(why)
	}
}

// ledgerOf is the engine's SpaceLedger of the status's.
func ledgerOf(l *graduatorv1alpha1.EtcdSpaceLedger) migration.SpaceLedger {
	if l == nil {
		return migration.SpaceLedger{}
	}
	rev, _ := strconv.ParseUint(l.Revision, 10, 64)
	return migration.SpaceLedger{InUse: l.InUse, Peak: l.Peak, Outstanding: l.Outstanding, Revision: rev}
}

// ledgerStatus is the status's of the engine's SpaceLedger (nil: none).
func ledgerStatus(l migration.SpaceLedger) *graduatorv1alpha1.EtcdSpaceLedger {
	if l == (migration.SpaceLedger{}) {
		return nil
	}
	out := &graduatorv1alpha1.EtcdSpaceLedger{InUse: l.InUse, Peak: l.Peak, Outstanding: l.Outstanding}
	if l.Revision > 0 {
		out.Revision = strconv.FormatUint(l.Revision, 10)
	}
	return out
}
