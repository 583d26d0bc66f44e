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

package graduation

// The migration step: settle, preflight before the first write, run, prune.

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/apiservers"
	"github.com/graduator/graduator/internal/storagemigration"
)

// migration rewrites every object in the storage version and prunes
// storedVersions, only after a complete clean run on this CRD generation.
func (p *planner) migration(s Step, target string) (Step, bool) {
	stored := p.crd.Status.StoredVersions
	if len(stored) == 1 && stored[0] == target && !p.runUnverified(target) && !p.rewriteAsked(target) {
		p.nothingStale(target)
		return s, false
	}
	p.set(graduatorv1alpha1.ConditionStoredVersionsPruned, metav1.ConditionFalse, ReasonWaitingForMigration,
		"status.storedVersions is [%s]; pruned once every object is rewritten as %s", strings.Join(stored, ", "), target)
	if s, stop := p.otherMigration(s, target); stop {
		return s, true
	}
	run := p.status.Migration
	switch {
	case run == nil || run.StorageVersion != target || (run.CRDGeneration != p.crd.Generation && !p.carried(run)):
		return p.startRun(s, target, run), true
	case run.CompletedAt == nil:
		return p.runGoesOn(s, target, run), true
	case run.Failed > 0:
		return p.retryFailedRun(s, target, run), true
	}
	return p.prune(s, target, stored, run), true
}

// nothingStale marks a CRD that stores only the target as migrated and
// pruned, naming the run that got it there when there was one.
func (p *planner) nothingStale(target string) {
	reason, msg := ReasonNothingToMigrate, fmt.Sprintf("every object is stored as %s", target)
	if run := p.status.Migration; run != nil && run.StorageVersion == target && run.CompletedAt != nil {
		reason = ReasonMigrated
		msg = migratedMessage(run, target)
	}
	p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionTrue, reason, "%s", msg)
	p.set(graduatorv1alpha1.ConditionStoredVersionsPruned, metav1.ConditionTrue, ReasonPruned,
		"status.storedVersions is [%s]", target)
}

// otherMigration keeps two migrations of one resource from running at once.
// While the in-tree migrator runs (it marks the CRD StorageMigrating at its
// generation), neither a run nor a prune starts; when it succeeds it prunes
// storedVersions itself, and migration goes on to retirement. With the
// in-tree engine, a run of this CRD generation that succeeded is pruned
// below, under the same expectation as a run of Graduator's own.
func (p *planner) otherMigration(s Step, target string) (Step, bool) {
	if p.spec.Migration.Engine == graduatorv1alpha1.EngineStorageVersionMigration {
		return p.inTreeEngine(s, target)
	}
	if !storagemigration.CRDMigrating(p.crd) {
		return s, false
	}
	s.Phase = graduatorv1alpha1.PhaseMigrating
	s.RequeueAfter = inTreePollInterval
	msg := storagemigration.Message(p.crd, nil)
	p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonInTreeMigrationRunning, "%s", msg)
	return p.finish(s, metav1.ConditionFalse, ReasonInTreeMigrationRunning, "%s", msg), true
}

// startRun starts a new run once the storage version settled and the
// preflight before the first write passed.
func (p *planner) startRun(s Step, target string, last *graduatorv1alpha1.MigrationStatus) Step {
	if wait, ok := p.settling(target); ok {
		if wait.wait == 0 {
			p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonVersionNotServed, "%s", wait.why)
			return p.blocked(s, ReasonVersionNotServed, "%s; nothing was rewritten", wait.why)
		}
		s.Phase = graduatorv1alpha1.PhaseMigrating
		s.RequeueAfter = wait.wait
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonSettling,
			"waiting for every API server to store %s before migrating: %s", target, wait.why)
		return p.finish(s, metav1.ConditionFalse, ReasonInProgress,
			"the storage version %s is settling: %s; looking again in %s", target, wait.why, wait.wait.Round(time.Second))
	}
	if s, stop := p.preflight(s, target, beforeFirstWrite); stop {
		return s
	}
	s.Action = ActionMigrate
	s.Restart = true
	s.Phase = graduatorv1alpha1.PhaseMigrating
	why := "starting"
	switch joined := p.joinedDuring(last); {
	case last != nil && last.CRDGeneration != p.crd.Generation:
		why = fmt.Sprintf("the CRD changed (generation %d -> %d) since the last run; restarting", last.CRDGeneration, p.crd.Generation)
	case len(joined) > 0:
		why = fmt.Sprintf("API server %s joined during the last run and was not checked while it took writes; restarting",
			strings.Join(joined, ", "))
	}
	if checked := ServersChecked(p.in.APIServers, SettleDelay(p.spec.Migration)); checked != "" {
		why += " (" + checked + ")"
	}
	p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonMigrating,
		"rewriting every object as %s: %s", target, why)
	return p.finish(s, metav1.ConditionFalse, ReasonInProgress, "migrating objects to %s", target)
}

// runGoesOn continues a run that has not completed.
func (p *planner) runGoesOn(s Step, target string, run *graduatorv1alpha1.MigrationStatus) Step {
	s.Action = ActionMigrate
	s.Phase = graduatorv1alpha1.PhaseMigrating
	p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonMigrating,
		"rewriting every object as %s: %d listed, %d rewritten, %d skipped, %d failed so far",
		target, run.Listed, run.Rewritten, run.Skipped, run.Failed)
	if run.Failed > 0 {
		// Rejections (an admission webhook or policy, validation) show
		// while the run goes on, not only once it ends.
		return p.finish(s, metav1.ConditionFalse, ReasonMigrationFailed,
			"migrating objects to %s: %d could not be rewritten so far%s; storedVersions will not be pruned until they are",
			target, run.Failed, firstFailure(run))
	}
	// A wait for etcd's compaction shows where people look, with the
	// setting that would lift it when etcd's quota was not told.
	return p.finish(s, metav1.ConditionFalse, ReasonInProgress, "migrating objects to %s%s", target, compactionWait(run))
}

// retryFailedRun blocks on a run that ended with objects it could not
// rewrite, and starts a new run once BlockedRetryInterval has passed.
func (p *planner) retryFailedRun(s Step, target string, run *graduatorv1alpha1.MigrationStatus) Step {
	msg := fmt.Sprintf("%d objects could not be rewritten as %s%s; storedVersions is not pruned",
		run.Failed, target, firstFailure(run))
	p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonMigrationFailed, "%s", msg)
	retryAt := run.CompletedAt.Add(BlockedRetryInterval)
	if p.in.Now.Before(retryAt) {
		s.RequeueAfter = retryAt.Sub(p.in.Now)
		return p.blocked(s, ReasonMigrationFailed, "%s; retrying in %s", msg, s.RequeueAfter.Round(time.Second))
	}
	s.Action = ActionMigrate
	s.Restart = true
	s.Phase = graduatorv1alpha1.PhaseMigrating
	return p.finish(s, metav1.ConditionFalse, ReasonMigrationFailed, "%s; retrying the migration", msg)
}

// prune prunes storedVersions after a complete clean run, once every API
// server is found again serving the storage version's hash (pruneHeld).
func (p *planner) prune(s Step, target string, stored []string, run *graduatorv1alpha1.MigrationStatus) Step {
	p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionTrue, ReasonMigrated, "%s", migratedMessage(run, target))
	if len(p.joinedDuring(run)) > 0 {
		return p.startRun(s, target, run)
	}
	if s, held := p.pruneHeld(s, target, stored, run); held {
		return s
	}
	s.Action = ActionPrune
	s.Phase = graduatorv1alpha1.PhasePruning
	msg := fmt.Sprintf("pruning status.storedVersions [%s] to [%s]", strings.Join(stored, ", "), target)
	if clock := PruneRestsOnClock(p.in.APIServers, SettleDelay(p.spec.Migration)); clock != "" {
		msg += "; " + clock
	}
	p.set(graduatorv1alpha1.ConditionStoredVersionsPruned, metav1.ConditionFalse, ReasonPrunePending, "%s", msg)
	return p.finish(s, metav1.ConditionFalse, ReasonInProgress, "pruning status.storedVersions to [%s]", target)
}

// pruneHeld holds the prune while an API server is found behind (it still
// writes the old version), and while the servers checked before the run
// cannot be asked again. Where they could not be asked before the run
// either, the settle delay stood for the check, and the prune goes on.
func (p *planner) pruneHeld(s Step, target string, stored []string, run *graduatorv1alpha1.MigrationStatus) (Step, bool) {
	v := p.in.APIServers
	var why string
	switch {
	case v.State == apiservers.Behind:
		why = v.Reason
		s.RequeueAfter = settlePollInterval
	case v.State == apiservers.Unchecked && len(run.APIServers) > 0:
		why = fmt.Sprintf("the API servers checked before the run (%s) cannot be asked again: %s",
			strings.Join(run.APIServers, ", "), v.Reason)
		s.RequeueAfter = BlockedRetryInterval
	default:
		return s, false
	}
	s.Phase = graduatorv1alpha1.PhasePruning
	p.set(graduatorv1alpha1.ConditionStoredVersionsPruned, metav1.ConditionFalse, ReasonServersBehind,
		"status.storedVersions [%s] is not pruned to [%s] while %s", strings.Join(stored, ", "), target, why)
	return p.finish(s, metav1.ConditionFalse, ReasonServersBehind,
		"the prune of status.storedVersions waits: %s; looking again in %s", why, s.RequeueAfter.Round(time.Second)), true
}

// joinedDuring returns the API servers found now that were not among those
// checked before run: a server that joined while the run wrote (a rolling
// control-plane upgrade) may have written the old version, and the sweep
// trusts the run's own writes. Nothing when the servers were not checked
// before the run.
func (p *planner) joinedDuring(run *graduatorv1alpha1.MigrationStatus) []string {
	if run == nil || len(run.APIServers) == 0 || run.CompletedAt == nil || p.in.APIServers.State != apiservers.Agree {
		return nil
	}
	return apiservers.Joined(run.APIServers, p.in.APIServers.Servers)
}

// ServersChecked says how the API servers were checked before a run's
// first write, for its status: every one asked, or why they could not be
// and the settle delay waited instead; empty when they were not asked. The
// verdict comes first, so that a status cut to its length keeps it.
func ServersChecked(v apiservers.Verdict, settle time.Duration) string {
	switch v.State {
	case apiservers.Agree:
		return v.Reason
	case apiservers.Unchecked:
		return fmt.Sprintf("%s: %s", clockStood(v, settle), v.Reason)
	}
	return ""
}

// clockStood says that the API servers were not checked and what stood
// for the check: the settle delay, or nothing; and the right that would
// let them be checked, when its lack is why.
func clockStood(v apiservers.Verdict, settle time.Duration) string {
	s := fmt.Sprintf("not checked; the settle delay of %s was waited instead", settle)
	if settle <= 0 {
		s = "not checked; no settle delay was waited"
	}
	if v.Remedy != "" {
		s += " (" + v.Remedy + " would let them be checked)"
	}
	return s
}

// PruneRestsOnClock is what the prune's own line says when the API servers
// could not be checked: its safety rests on the settle delay, not on a
// check. Empty when they were checked.
func PruneRestsOnClock(v apiservers.Verdict, settle time.Duration) string {
	if v.State != apiservers.Unchecked {
		return ""
	}
	return fmt.Sprintf("the API servers were %s, so the prune's safety rests on the clock", clockStood(v, settle))
}

// SettleDelay is the settle delay of settings: how long after the storage
// switch a run waits where the API servers cannot be asked one by one.
func SettleDelay(settings graduatorv1alpha1.MigrationSettings) time.Duration {
	if d := settings.SettleDelay; d != nil {
		return d.Duration
	}
	return DefaultSettleDelay
}

// preflightGate is where the preflight runs: before the storage switch
// (managed mode) or before a run's first write (both modes: in GitOps mode
// the manifest switched storage, so this is its only preflight). It says
// which phase and condition show the wait, and what stays unchanged when the
// preflight fails.
type preflightGate struct {
	phase graduatorv1alpha1.Phase
	// condition shows the wait with status and the message (a format of the
	// target version).
	condition string
	status    metav1.ConditionStatus
	waiting   string
	// failed, when set, is the condition's message on a failure, besides
	// PreflightPassed.
	failed    string
	unchanged string
}

var (
	beforeSwitch = preflightGate{
		phase:     graduatorv1alpha1.PhasePreflight,
		condition: graduatorv1alpha1.ConditionPreflightPassed, status: metav1.ConditionUnknown,
		waiting:   "checking that objects read and write at %s",
		unchanged: "nothing was changed",
	}
	beforeFirstWrite = preflightGate{
		phase:     graduatorv1alpha1.PhaseMigrating,
		condition: graduatorv1alpha1.ConditionMigrated, status: metav1.ConditionFalse,
		waiting:   "checking that objects read and write at %s before the first write",
		failed:    "the preflight before the first write failed",
		unchanged: "nothing was rewritten",
	}
)

// preflight asks for the preflight checks at gate until they ran, blocks
// when they failed, and lets the step go on once they passed.
func (p *planner) preflight(s Step, target string, gate preflightGate) (Step, bool) {
	pre := p.in.Preflight
	switch {
	case pre == nil:
		s.Action = ActionPreflight
		s.Phase = gate.phase
		p.set(gate.condition, gate.status, ReasonPreflightPending, gate.waiting, target)
		return p.finish(s, metav1.ConditionFalse, ReasonInProgress, "running the preflight checks for %s", target), true
	case !pre.Passed:
		p.set(graduatorv1alpha1.ConditionPreflightPassed, metav1.ConditionFalse, pre.Reason, "%s", pre.Message)
		if gate.failed != "" {
			p.set(gate.condition, metav1.ConditionFalse, ReasonPreflightFailed, "%s", gate.failed)
		}
		return p.preflightFailed(s, target, pre, gate.unchanged), true
	}
	return s, false
}

// preflightFailed blocks the graduation on a failed preflight. A lossy
// conversion has its own reason: it is a person's to fix, or to accept.
func (p *planner) preflightFailed(s Step, target string, pre *PreflightResult, unchanged string) Step {
	if pre.Reason == ReasonConversionLossy {
		accept := pre.AcceptLoss.Advice(pre.Lost)
		return p.blocked(s, ReasonConversionLossy, "the conversion does not round-trip: %s; fix the conversion webhook or "+
			"the schema of %s, or %s; %s", pre.Message, target, accept, unchanged)
	}
	return p.blocked(s, ReasonPreflightFailed, "preflight for storage version %s failed (%s): %s; %s",
		target, pre.Reason, pre.Message, unchanged)
}

// CompletedRunCarriesOver reports whether a run that completed on the CRD's
// previous generation still speaks for every object: the CRD was edited
// exactly once since (a version added, say), it stores the run's version,
// and it existed before the run started. One edit cannot move the storage
// version and put it back, so every object written since the run started is
// stored in that version and the run need not be repeated. The driver then
// carries the run to the CRD's generation (CarryRun) before it prunes, so a
// second edit is still seen. Without it, adding the next release's version
// while storedVersions was being pruned sent the policy back to Migrating.
func CompletedRunCarriesOver(run *graduatorv1alpha1.MigrationStatus, crd *apiextensionsv1.CustomResourceDefinition) bool {
	return run != nil && run.CompletedAt != nil && run.StartedAt != nil &&
		run.CRDGeneration+1 == crd.Generation && run.StorageVersion == StorageVersion(crd) &&
		crd.CreationTimestamp.Before(run.StartedAt)
}

// CarryRun moves a completed run that carries over to the CRD
// (CompletedRunCarriesOver) to the CRD's generation, so that the prune's
// expectation and later plans compare against the CRD as it is now.
func CarryRun(run *graduatorv1alpha1.MigrationStatus, crd *apiextensionsv1.CustomResourceDefinition) {
	if CompletedRunCarriesOver(run, crd) {
		run.CRDGeneration = crd.Generation
	}
}

// carried reports a completed run the plan keeps across one edit of the
// CRD (CompletedRunCarriesOver). A door's request to rewrite every object
// (RewriteAll) is met only on the CRD's own generation.
func (p *planner) carried(run *graduatorv1alpha1.MigrationStatus) bool {
	return !p.in.RewriteAll && CompletedRunCarriesOver(run, p.crd)
}

// runUnverified reports a run of this policy on this CRD generation that
// started and has not completed: storedVersions pruned meanwhile, by someone
// else, proves nothing. Kubernetes 1.37.2's in-tree migrator was seen
// pruning after a run that Failed on its first object, whether Graduator
// drives it (engine StorageVersionMigration) or someone created it beside a
// run of Graduator's own engine; either run goes on and checks every object.
func (p *planner) runUnverified(target string) bool {
	run := p.status.Migration
	return run != nil && run.StartedAt != nil && run.StorageVersion == target &&
		run.CRDGeneration == p.crd.Generation && run.CompletedAt == nil
}

// rewriteAsked reports a door's request to rewrite every object (RewriteAll)
// that no complete run of this CRD generation has met yet.
func (p *planner) rewriteAsked(target string) bool {
	run := p.status.Migration
	met := run != nil && run.StorageVersion == target && run.CRDGeneration == p.crd.Generation && run.CompletedAt != nil
	return p.in.RewriteAll && !met
}

// migratedMessage is the Migrated condition's message of a finished run.
func migratedMessage(run *graduatorv1alpha1.MigrationStatus, target string) string {
	if svm := run.StorageVersionMigration; svm != nil {
		return fmt.Sprintf("every object rewritten as %s by the in-tree StorageVersionMigration %s, checked by Graduator "+
			"(%d objects it had missed rewritten, %d skipped)", target, svm.Name, run.Rewritten, run.Skipped)
	}
	return fmt.Sprintf("%d objects rewritten as %s, %d skipped", run.Rewritten, target, run.Skipped)
}

// settle is how long the migration still waits after the storage switch,
// and why. A zero wait is a storage version that cannot settle, however
// long the wait (it is not served); why then says what to do.
type settle struct {
	wait time.Duration
	why  string
}

// settling reports how long to wait before the migration's checkpoint can be
// taken. A storage version that is not served can never settle (discovery
// shows no hash for it): that is said at once, with what to do, never
// waited on. Discovery (through whichever API server answers) must advertise
// the new storage version; then, where every API server can be asked, every
// one must serve its hash, and ServersSettle must have passed since they
// all did; where they cannot be asked, the settle delay must have passed
// since the switch was observed, in the hope that every API server of an
// HA control plane writes the new version by then.
func (p *planner) settling(target string) (settle, bool) {
	if !apihelpers.HasServedCRDVersion(p.crd, target) {
		return settle{0, fmt.Sprintf("%s is the storage version of %s but is not served, so discovery never shows "+
			"its hash and no wait can settle it: serve %s (served: true in the CRD), or let graduator prepare --against the "+
			"release serve it for you", target, p.crd.Name, target)}, true
	}
	if !p.in.StorageSettled {
		return settle{settlePollInterval, fmt.Sprintf("discovery does not advertise %s's hash yet", target)}, true
	}
	switch v := p.in.APIServers; v.State {
	case apiservers.Behind:
		return settle{settlePollInterval, v.Reason}, true
	case apiservers.Agree:
		left := ServersSettle
		if !p.in.AgreedSince.IsZero() {
			left = p.in.AgreedSince.Add(ServersSettle).Sub(p.in.Now)
		}
		if left <= 0 {
			return settle{}, false
		}
		return settle{left, fmt.Sprintf("%s; then %s more, as discovery can show the hash a moment before the server writes it",
			v.Reason, ServersSettle)}, true
	}
	delay := SettleDelay(p.spec.Migration)
	why := fmt.Sprintf("the settle delay of %s after the switch", delay)
	if v := p.in.APIServers; v.State == apiservers.Unchecked {
		why = fmt.Sprintf("%s, so the settle delay of %s after the switch stands for the check", v.Reason, delay)
	}
	since := p.status.StorageVersionSince
	if since == nil || p.status.StorageVersion != target {
		return settle{delay, why}, delay > 0
	}
	if left := since.Add(delay).Sub(p.in.Now); left > 0 {
		return settle{left, why}, true
	}
	return settle{}, false
}

func firstFailure(run *graduatorv1alpha1.MigrationStatus) string {
	if len(run.Failures) == 0 {
		return ""
	}
	f := run.Failures[0]
	name := f.Name
	if f.Namespace != "" {
		name = f.Namespace + "/" + f.Name
	}
	return fmt.Sprintf(" (first: %s: %s)", name, f.Reason)
}

// compactionWait is what a Ready message adds while the run waits for
// etcd's compaction.
func compactionWait(run *graduatorv1alpha1.MigrationStatus) string {
	if run.CompactionWait == "" {
		return ""
	}
	return ": " + run.CompactionWait
}
