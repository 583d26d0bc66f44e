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

// Package graduation decides, from plain values, the next step of a CRD's
// graduation: given a CustomResourceDefinition, its CRDVersionPolicy and what
// the reconciler observed, Plan returns one Step and the conditions that
// explain it. Nothing here does I/O; the controller performs the step.
package graduation

import (
	"fmt"
	"slices"
	"strings"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/storagemigration"
)

// Action is what the reconciler does for a Step.
type Action string

const (
	// ActionNone: nothing to do now; requeue after Step.RequeueAfter if set.
	ActionNone Action = "None"
	// ActionPreflight: run the preflight checks against Step.StorageVersion
	// and plan again with their result.
	ActionPreflight Action = "Preflight"
	// ActionSwitchStorage: set storage: true on Step.StorageVersion.
	ActionSwitchStorage Action = "SwitchStorage"
	// ActionMigrate: run (or resume) the storage migration to
	// Step.StorageVersion.
	ActionMigrate Action = "Migrate"
	// ActionPrune: set status.storedVersions to [Step.StorageVersion].
	ActionPrune Action = "Prune"
	// ActionDeprecate: mark Step.Versions deprecated with the policy's
	// warnings.
	ActionDeprecate Action = "Deprecate"
	// ActionUnserve: set served: false on Step.Versions.
	ActionUnserve Action = "Unserve"
	// ActionCleanupManagedFields: drop managedFields entries of Step.Versions
	// from every object.
	ActionCleanupManagedFields Action = "CleanupManagedFields"
)

// Condition reasons. They are contracts: alerts and runbooks match on them.
const (
	ReasonPaused                   = "Paused"
	ReasonCRDNotFound              = "CRDNotFound"
	ReasonUnknownVersion           = "UnknownVersion"
	ReasonVersionNotServed         = "VersionNotServed"
	ReasonConversionNotConfigured  = "ConversionNotConfigured"
	ReasonPreflightPending         = "PreflightPending"
	ReasonPreflightFailed          = "PreflightFailed"
	ReasonPreflightSucceeded       = "PreflightSucceeded"
	ReasonSwitchPending            = "SwitchPending"
	ReasonStorageVersionSet        = "StorageVersionSet"
	ReasonSettling                 = "Settling"
	ReasonMigrating                = "Migrating"
	ReasonMigrationFailed          = "MigrationFailed"
	ReasonMigrated                 = "Migrated"
	ReasonNothingToMigrate         = "NothingToMigrate"
	ReasonWaitingForMigration      = "WaitingForMigration"
	ReasonPruned                   = "Pruned"
	ReasonPrunePending             = "PrunePending"
	ReasonRetiring                 = "Retiring"
	ReasonGracePeriod              = "GracePeriod"
	ReasonRetired                  = "Retired"
	ReasonAwaitingManifestChange   = "AwaitingManifestChange"
	ReasonCleaningManagedFields    = "CleaningManagedFields"
	ReasonGraduated                = "Graduated"
	ReasonInProgress               = "InProgress"
	ReasonStatusSubresourceMissing = "StatusSubresourceMissing"
	// ReasonInTreeMigrationRunning: Kubernetes' own StorageVersionMigration
	// migrates the CRD's resource; Graduator waits rather than run beside it.
	ReasonInTreeMigrationRunning = "InTreeMigrationRunning"
	// ReasonInTreeMigrationFailed: the StorageVersionMigration Graduator
	// drives (engine StorageVersionMigration) ended Failed; it is deleted and
	// created again after the backoff of a stalled step.
	ReasonInTreeMigrationFailed = "InTreeMigrationFailed"
)

const (
	// BlockedRetryInterval is how long a blocked graduation waits before the
	// reconciler tries again (webhooks come back; certificates rotate).
	BlockedRetryInterval = 30 * time.Second
	// DefaultSettleDelay is used when the policy sets none.
	DefaultSettleDelay = 10 * time.Second
	// settlePollInterval is how often to look again while discovery still
	// advertises the old storage version.
	settlePollInterval = 2 * time.Second
	// inTreePollInterval is how often to look again while an in-tree
	// StorageVersionMigration runs.
	inTreePollInterval = 10 * time.Second
	// inTreeFollowInterval is how often to look at the StorageVersionMigration
	// Graduator drives while it runs: the operator does not watch them (the
	// API and the right to watch it are optional).
	inTreeFollowInterval = 5 * time.Second
)

// PreflightResult is the outcome of the checks the reconciler runs before the
// storage switch: a sample of objects read at the target version (exercising
// conversion) and a dry-run no-op write (exercising validation and
// admission).
type PreflightResult struct {
	Passed bool
	// Reason is a CamelCase reason such as ConversionFailed; Message names
	// the object and the error.
	Reason  string
	Message string
}

// Input is everything Plan looks at.
type Input struct {
	// CRD is the governed CustomResourceDefinition; nil when it does not
	// exist.
	CRD *apiextensionsv1.CustomResourceDefinition
	// Policy is the CRDVersionPolicy; its status must already hold this
	// reconcile's observation (see Observe).
	Policy *graduatorv1alpha1.CRDVersionPolicy
	// Now is the time of the reconcile.
	Now time.Time
	// Preflight is the result of the preflight checks run during this
	// reconcile for the planned storage version; nil when not run yet.
	Preflight *PreflightResult
	// StorageSettled is true when API discovery advertises the CRD's current
	// storage version (its storageVersionHash).
	StorageSettled bool
	// Failed is the step that failed in this reconcile, with its error; nil
	// when none did.
	Failed *StepError
	// StorageVersionMigration is the in-tree migration named after the CRD
	// (storagemigration.NameFor) as read in this reconcile, when the policy's
	// engine is StorageVersionMigration; nil when there is none. Its outcome
	// must already be in the status (ObserveInTree).
	StorageVersionMigration *svmv1.StorageVersionMigration
	// InTreeConversionFailed is what a sample read of the objects at an old
	// stored version said, when it failed to convert, while this run's
	// in-tree migration runs: the in-tree migrator retries a conversion
	// webhook that is down for as long as it is down, and its own status
	// does not say so. Empty when the read converted or was not made.
	InTreeConversionFailed string
	// Attempts is how many steps failed in a row before this plan
	// (status.retries): while it is above 0 and the plan still has a step to
	// take, Ready keeps saying why the last try failed.
	Attempts int32
}

// StepError is a step that returned an error.
type StepError struct {
	// Step is the action, or another name for a read the plan depends on
	// (StepDiscovery, "GetCRD").
	Step string
	Err  error
}

// Step is the next thing to do and the conditions that describe the
// graduation now.
type Step struct {
	Action Action
	Phase  graduatorv1alpha1.Phase
	// StorageVersion is the version the CRD should store.
	StorageVersion string
	// Versions are the versions Deprecate, Unserve and CleanupManagedFields
	// act on, sorted.
	Versions []string
	// Restart asks Migrate to discard saved progress and start a new run.
	Restart bool
	// RequeueAfter, when set, is when to plan again.
	RequeueAfter time.Duration
	// Conditions are the policy's conditions without timestamps or
	// observedGeneration; the reconciler fills those in.
	Conditions []metav1.Condition
	// Retries is what status.retries becomes: the failures in a row.
	Retries int32
	// Stall is set when Input.Failed is: why the step failed and when to
	// try again (RequeueAfter is the same wait).
	Stall *Stall
}

// Message returns the Ready condition's message: the one line a person reads
// first.
func (s Step) Message() string {
	if c := meta.FindStatusCondition(s.Conditions, graduatorv1alpha1.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}

// Reason returns the Ready condition's reason.
func (s Step) Reason() string {
	if c := meta.FindStatusCondition(s.Conditions, graduatorv1alpha1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

// planner accumulates the conditions while Plan walks the steps in order.
type planner struct {
	in         Input
	crd        *apiextensionsv1.CustomResourceDefinition
	spec       graduatorv1alpha1.CRDVersionPolicySpec
	status     graduatorv1alpha1.CRDVersionPolicyStatus
	conditions []metav1.Condition
}

func (p *planner) set(condType string, status metav1.ConditionStatus, reason, format string, args ...any) {
	meta.SetStatusCondition(&p.conditions, metav1.Condition{
		Type: condType, Status: status, Reason: reason, Message: fmt.Sprintf(format, args...),
	})
}

// unknown marks every listed condition that this plan did not decide
// Unknown: a later step cannot be judged before an earlier one is done. A
// condition that was True stays True: being paused or blocked does not undo
// what was done (a step that changes what it means sets it explicitly).
func (p *planner) unknown(reason, message string, condTypes ...string) {
	for _, t := range condTypes {
		if meta.FindStatusCondition(p.conditions, t) != nil {
			continue
		}
		if prev := meta.FindStatusCondition(p.status.Conditions, t); prev != nil && prev.Status == metav1.ConditionTrue {
			meta.SetStatusCondition(&p.conditions, metav1.Condition{
				Type: t, Status: prev.Status, Reason: prev.Reason, Message: prev.Message,
			})
			continue
		}
		p.set(t, metav1.ConditionUnknown, reason, "%s", message)
	}
}

var allConditions = []string{
	graduatorv1alpha1.ConditionPreflightPassed,
	graduatorv1alpha1.ConditionStorageVersionSet,
	graduatorv1alpha1.ConditionMigrated,
	graduatorv1alpha1.ConditionStoredVersionsPruned,
	graduatorv1alpha1.ConditionVersionsRetired,
}

// finish completes a step: Ready mirrors the blocking reason, Reconciling and
// Stalled follow Ready (SetProgress), and conditions not reached yet are
// Unknown.
// While failed steps are retried (Input.Attempts) and the plan still has a
// step to take, Ready keeps the last failure's words until a step succeeds;
// a plan with nothing to do (paused, blocked, done) ends the retries.
// compactionWait is what a Ready message adds while the run waits for
// etcd's compaction.
func compactionWait(run *graduatorv1alpha1.MigrationStatus) string {
	if run.CompactionWait == "" {
		return ""
	}
	return ": " + run.CompactionWait
}

func (p *planner) finish(s Step, ready metav1.ConditionStatus, reason, format string, args ...any) Step {
	p.set(graduatorv1alpha1.ConditionReady, ready, reason, format, args...)
	p.unknown(ReasonWaitingForPrevious, "waits for the earlier steps", allConditions...)
	if p.in.Attempts > 0 && s.Action != ActionNone {
		s.Retries = p.in.Attempts
		if prev := meta.FindStatusCondition(p.status.Conditions, graduatorv1alpha1.ConditionReady); prev != nil {
			meta.SetStatusCondition(&p.conditions, metav1.Condition{
				Type: prev.Type, Status: prev.Status, Reason: prev.Reason, Message: prev.Message,
			})
		}
	}
	SetProgress(&p.conditions, s.Phase)
	s.Conditions = p.conditions
	return s
}

// stalled is the plan after a step failed: the phase and every condition
// stay as they were (the run is not lost), and Ready says why the step
// failed and when it is tried again.
func (p *planner) stalled(failed StepError) Step {
	attempt := p.in.Attempts + 1
	stall := StallOf(failed.Step, failed.Err, attempt)
	conditions := make([]metav1.Condition, 0, len(p.status.Conditions)+1)
	for _, c := range p.status.Conditions {
		conditions = append(conditions, metav1.Condition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
	}
	meta.SetStatusCondition(&conditions, metav1.Condition{
		Type: graduatorv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: stall.Reason, Message: stall.Message,
	})
	SetProgress(&conditions, p.status.Phase)
	return Step{
		Action: ActionNone, Phase: p.status.Phase, RequeueAfter: stall.RetryAfter,
		Conditions: conditions, Retries: attempt, Stall: &stall,
	}
}

// ReasonWaitingForPrevious marks a condition whose step is not reached yet.
const ReasonWaitingForPrevious = "WaitingForEarlierStep"

func (p *planner) blocked(s Step, reason, format string, args ...any) Step {
	s.Phase = graduatorv1alpha1.PhaseBlocked
	if s.RequeueAfter == 0 {
		s.RequeueAfter = BlockedRetryInterval
	}
	return p.finish(s, metav1.ConditionFalse, reason, format, args...)
}

// Plan returns the next step of the graduation. It is deterministic in its
// Input and never returns a step that breaks the design's invariants: it
// never unserves the storage version or a stored version, and never prunes
// after a partial run, a failed run, or a run on another CRD generation.
func Plan(in Input) Step {
	p := &planner{in: in, crd: in.CRD, spec: in.Policy.Spec, status: in.Policy.Status}
	none := Step{Action: ActionNone}

	if in.Failed != nil {
		return p.stalled(*in.Failed)
	}
	if p.spec.Paused {
		s := none
		s.Phase = in.Policy.Status.Phase
		if s.Phase == "" {
			s.Phase = graduatorv1alpha1.PhasePending
		}
		return p.finish(s, metav1.ConditionFalse, ReasonPaused,
			"the policy is paused; set spec.paused to false to continue")
	}
	if p.crd == nil {
		s := none
		s.Phase = graduatorv1alpha1.PhaseBlocked
		// The CRD watch wakes the policy up when the CRD appears.
		return p.finish(s, metav1.ConditionFalse, ReasonCRDNotFound,
			"CustomResourceDefinition %s does not exist; create it or delete this policy", in.Policy.Name)
	}

	gitOps := p.spec.StorageVersion == ""
	current := StorageVersion(p.crd)
	target := p.spec.StorageVersion
	if gitOps {
		target = current
	}
	none.StorageVersion = target

	if s, stop := p.checkVersions(none, target, gitOps); stop {
		return s
	}
	if s, stop := p.storage(none, current, target); stop {
		return s
	}
	if s, stop := p.migration(none, target); stop {
		return s
	}
	return p.retirement(none, target, gitOps)
}

// checkVersions refuses a policy that names versions the CRD does not have.
func (p *planner) checkVersions(s Step, target string, gitOps bool) (Step, bool) {
	if StatusSubresourceMissing(p.crd, target, p.spec.Migration.WriteTo) {
		// Every write to /status would answer 404 and migrate nothing.
		return p.blocked(s, ReasonStatusSubresourceMissing,
			"spec.migration.writeTo is Status but version %s of %s has no status subresource, so no object could be "+
				"rewritten; set writeTo: Object or enable subresources.status on %s; nothing was changed",
			target, p.crd.Name, target), true
	}
	if !gitOps {
		if crdVersion(p.crd, target) == nil {
			return p.blocked(s, ReasonUnknownVersion,
				"spec.storageVersion %q is not a version of CustomResourceDefinition %s (it has %s); nothing was changed",
				target, p.crd.Name, strings.Join(versionNames(p.crd), ", ")), true
		}
		if !apihelpers.HasServedCRDVersion(p.crd, target) {
			return p.blocked(s, ReasonVersionNotServed,
				"version %s of %s is not served; serve it before making it the storage version; nothing was changed",
				target, p.crd.Name), true
		}
	}
	// A listed version missing from the CRD is fine once the version has been
	// retired (removed from the manifest); one the CRD never had is a typo.
	var unknown []string
	for _, name := range listedVersions(p.spec) {
		if crdVersion(p.crd, name) == nil && !p.everObserved(name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		return p.blocked(s, ReasonUnknownVersion,
			"%s listed in the policy %s not a version of CustomResourceDefinition %s (it has %s); nothing was changed",
			strings.Join(unknown, ", "), isAre(len(unknown)), p.crd.Name, strings.Join(versionNames(p.crd), ", ")), true
	}
	return s, false
}

// storage walks preflight and the storage switch (managed mode only: in GitOps
// mode the CRD's own flag is the target, so it is always set).
func (p *planner) storage(s Step, current, target string) (Step, bool) {
	if current == target {
		p.set(graduatorv1alpha1.ConditionPreflightPassed, metav1.ConditionTrue, ReasonStorageVersionSet,
			"the CRD already stores %s", target)
		p.set(graduatorv1alpha1.ConditionStorageVersionSet, metav1.ConditionTrue, ReasonStorageVersionSet,
			"the CRD stores %s", target)
		return s, false
	}
	p.set(graduatorv1alpha1.ConditionStorageVersionSet, metav1.ConditionFalse, ReasonSwitchPending,
		"the CRD stores %s; Graduator will switch it to %s after the preflight checks", current, target)

	if ConversionMissing(p.crd, crdVersion(p.crd, current), crdVersion(p.crd, target)) {
		p.set(graduatorv1alpha1.ConditionPreflightPassed, metav1.ConditionFalse, ReasonConversionNotConfigured,
			"versions %s and %s have different schemas but the CRD has no conversion webhook", current, target)
		return p.blocked(s, ReasonConversionNotConfigured,
			"versions %s and %s of %s have different schemas but spec.conversion.strategy is not Webhook: "+
				"objects would be stored unconverted; configure a conversion webhook; nothing was changed",
			current, target, p.crd.Name), true
	}

	pre := p.in.Preflight
	switch {
	case pre == nil:
		s.Action = ActionPreflight
		s.Phase = graduatorv1alpha1.PhasePreflight
		p.set(graduatorv1alpha1.ConditionPreflightPassed, metav1.ConditionUnknown, ReasonPreflightPending,
			"checking that objects read and write at %s", target)
		return p.finish(s, metav1.ConditionFalse, ReasonInProgress, "running the preflight checks for %s", target), true
	case !pre.Passed:
		p.set(graduatorv1alpha1.ConditionPreflightPassed, metav1.ConditionFalse, pre.Reason, "%s", pre.Message)
		return p.preflightFailed(s, target, pre, "nothing was changed"), true
	}
	p.set(graduatorv1alpha1.ConditionPreflightPassed, metav1.ConditionTrue, ReasonPreflightSucceeded,
		"objects read and write at %s", target)
	s.Action = ActionSwitchStorage
	s.Phase = graduatorv1alpha1.PhaseSwitchingStorage
	return p.finish(s, metav1.ConditionFalse, ReasonInProgress, "switching the storage version from %s to %s", current, target), true
}

// migration rewrites every object in the storage version and prunes
// storedVersions, only after a complete clean run on this CRD generation.
func (p *planner) migration(s Step, target string) (Step, bool) {
	stored := p.crd.Status.StoredVersions
	if len(stored) == 1 && stored[0] == target && !p.runUnverified(target) {
		reason, msg := ReasonNothingToMigrate, fmt.Sprintf("every object is stored as %s", target)
		if run := p.status.Migration; run != nil && run.StorageVersion == target && run.CompletedAt != nil {
			reason = ReasonMigrated
			msg = migratedMessage(run, target)
		}
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionTrue, reason, "%s", msg)
		p.set(graduatorv1alpha1.ConditionStoredVersionsPruned, metav1.ConditionTrue, ReasonPruned,
			"status.storedVersions is [%s]", target)
		return s, false
	}
	p.set(graduatorv1alpha1.ConditionStoredVersionsPruned, metav1.ConditionFalse, ReasonWaitingForMigration,
		"status.storedVersions is [%s]; pruned once every object is rewritten as %s", strings.Join(stored, ", "), target)

	// Never two migrations of one resource at once: while the in-tree
	// migrator runs (it marks the CRD StorageMigrating at its generation),
	// neither a run nor a prune starts. When it succeeds it prunes
	// storedVersions itself, and the check above goes on to retirement.
	if p.spec.Migration.Engine == graduatorv1alpha1.EngineStorageVersionMigration {
		if s, stop := p.inTreeEngine(s, target); stop {
			return s, true
		}
		// The in-tree run of this CRD generation succeeded: prune below,
		// under the same expectation as a run of Graduator's own.
	} else if storagemigration.CRDMigrating(p.crd) {
		s.Phase = graduatorv1alpha1.PhaseMigrating
		s.RequeueAfter = inTreePollInterval
		msg := storagemigration.Message(p.crd, nil)
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonInTreeMigrationRunning, "%s", msg)
		return p.finish(s, metav1.ConditionFalse, ReasonInTreeMigrationRunning, "%s", msg), true
	}

	run := p.status.Migration
	fresh := run == nil || run.StorageVersion != target || run.CRDGeneration != p.crd.Generation
	if fresh {
		if wait, ok := p.settling(target); ok {
			s.Phase = graduatorv1alpha1.PhaseMigrating
			s.RequeueAfter = wait
			p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonSettling,
				"waiting for every API server to store %s before migrating", target)
			return p.finish(s, metav1.ConditionFalse, ReasonInProgress,
				"the storage version %s is settling; the migration starts in %s", target, wait.Round(time.Second)), true
		}
		if s, stop := p.preflightFirstWrite(s, target); stop {
			return s, true
		}
		s.Action = ActionMigrate
		s.Restart = true
		s.Phase = graduatorv1alpha1.PhaseMigrating
		why := "starting"
		if run != nil && run.CRDGeneration != p.crd.Generation {
			why = fmt.Sprintf("the CRD changed (generation %d -> %d) since the last run; restarting", run.CRDGeneration, p.crd.Generation)
		}
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonMigrating,
			"rewriting every object as %s: %s", target, why)
		return p.finish(s, metav1.ConditionFalse, ReasonInProgress, "migrating objects to %s", target), true
	}
	if run.CompletedAt == nil {
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
				target, run.Failed, firstFailure(run)), true
		}
		// A wait for etcd's compaction shows where people look, with the
		// setting that would lift it when etcd's quota was not told.
		return p.finish(s, metav1.ConditionFalse, ReasonInProgress, "migrating objects to %s%s", target, compactionWait(run)), true
	}
	if run.Failed > 0 {
		msg := fmt.Sprintf("%d objects could not be rewritten as %s%s; storedVersions is not pruned",
			run.Failed, target, firstFailure(run))
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonMigrationFailed, "%s", msg)
		retryAt := run.CompletedAt.Add(BlockedRetryInterval)
		if p.in.Now.Before(retryAt) {
			s.RequeueAfter = retryAt.Sub(p.in.Now)
			return p.blocked(s, ReasonMigrationFailed, "%s; retrying in %s", msg, s.RequeueAfter.Round(time.Second)), true
		}
		s.Action = ActionMigrate
		s.Restart = true
		s.Phase = graduatorv1alpha1.PhaseMigrating
		return p.finish(s, metav1.ConditionFalse, ReasonMigrationFailed, "%s; retrying the migration", msg), true
	}
	p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionTrue, ReasonMigrated, "%s", migratedMessage(run, target))
	s.Action = ActionPrune
	s.Phase = graduatorv1alpha1.PhasePruning
	p.set(graduatorv1alpha1.ConditionStoredVersionsPruned, metav1.ConditionFalse, ReasonPrunePending,
		"pruning status.storedVersions [%s] to [%s]", strings.Join(stored, ", "), target)
	return p.finish(s, metav1.ConditionFalse, ReasonInProgress, "pruning status.storedVersions to [%s]", target), true
}

// preflightFirstWrite checks, before the first write of a run, that
// objects read and write at the storage version: in GitOps mode this is the
// only preflight (the manifest switched storage), in managed mode the one
// after the switch. A failure blocks the run before anything is written.
func (p *planner) preflightFirstWrite(s Step, target string) (Step, bool) {
	pre := p.in.Preflight
	switch {
	case pre == nil:
		s.Action = ActionPreflight
		s.Phase = graduatorv1alpha1.PhaseMigrating
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonPreflightPending,
			"checking that objects read and write at %s before the first write", target)
		return p.finish(s, metav1.ConditionFalse, ReasonInProgress, "running the preflight checks for %s", target), true
	case !pre.Passed:
		p.set(graduatorv1alpha1.ConditionPreflightPassed, metav1.ConditionFalse, pre.Reason, "%s", pre.Message)
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonPreflightFailed,
			"the preflight before the first write failed")
		return p.preflightFailed(s, target, pre, "nothing was rewritten"), true
	}
	return s, false
}

// preflightFailed blocks the graduation on a failed preflight. A lossy
// conversion has its own reason: it is a person's to fix, or to accept.
func (p *planner) preflightFailed(s Step, target string, pre *PreflightResult, unchanged string) Step {
	if pre.Reason == ReasonConversionLossy {
		return p.blocked(s, ReasonConversionLossy, "the conversion does not round-trip: %s; fix the conversion webhook or "+
			"the schema of %s, or list the paths in spec.migration.acceptLoss; %s", pre.Message, target, unchanged)
	}
	return p.blocked(s, ReasonPreflightFailed, "preflight for storage version %s failed (%s): %s; %s",
		target, pre.Reason, pre.Message, unchanged)
}

// inTreeEngine drives the in-tree migrator (engine StorageVersionMigration)
// once the storage switch settled: create the StorageVersionMigration of this
// run, follow it while it runs, and have it deleted and created again when it
// Failed (the step fails, so the stall's backoff applies). It lets the plan go
// on to pruning only when the run's own migration Succeeded on this CRD
// generation (ObserveInTree recorded CompletedAt).
func (p *planner) inTreeEngine(s Step, target string) (Step, bool) {
	run := p.status.Migration
	svm := p.in.StorageVersionMigration
	fresh := run == nil || run.StorageVersion != target || run.CRDGeneration != p.crd.Generation || run.StorageVersionMigration == nil
	if !fresh && run.CompletedAt != nil {
		return s, false
	}
	ours := !fresh && svm != nil && svm.UID == run.StorageVersionMigration.UID
	s.Phase = graduatorv1alpha1.PhaseMigrating
	if !ours && storagemigration.CRDMigrating(p.crd) {
		// Someone else's in-tree run (one created by hand): never a second
		// one beside it.
		s.RequeueAfter = inTreePollInterval
		msg := storagemigration.Message(p.crd, nil)
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonInTreeMigrationRunning, "%s", msg)
		return p.finish(s, metav1.ConditionFalse, ReasonInTreeMigrationRunning, "%s", msg), true
	}
	name := storagemigration.NameFor(p.crd.Name)
	if fresh {
		if wait, ok := p.settling(target); ok {
			s.RequeueAfter = wait
			p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonSettling,
				"waiting for every API server to store %s before creating the StorageVersionMigration %s", target, name)
			return p.finish(s, metav1.ConditionFalse, ReasonInProgress,
				"the storage version %s is settling; the in-tree migration starts in %s", target, wait.Round(time.Second)), true
		}
		s.Action = ActionMigrate
		s.Restart = true
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonMigrating,
			"creating the in-tree StorageVersionMigration %s to rewrite every object as %s", name, target)
		return p.finish(s, metav1.ConditionFalse, ReasonInProgress,
			"migrating objects to %s with the in-tree StorageVersionMigration %s", target, name), true
	}
	name = run.StorageVersionMigration.Name
	if run.StorageVersionMigration.Phase == string(storagemigration.Succeeded) {
		// The in-tree migrator says it is done; Graduator's engine checks it
		// from the checkpoint taken when the migration was created: objects
		// written since are skipped without a write, any other is
		// rewritten. Only this run completes the migration and allows a
		// prune, whoever pruned storedVersions already.
		s.Action = ActionMigrate
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonMigrating,
			"the in-tree StorageVersionMigration %s succeeded; verifying that every object was written as %s since it was "+
				"created (Graduator rewrites any it missed): %d listed, %d rewritten, %d skipped so far",
			name, target, run.Listed, run.Rewritten, run.Skipped)
		return p.finish(s, metav1.ConditionFalse, ReasonInProgress,
			"verifying the in-tree migration of %s to %s", p.crd.Spec.Names.Plural, target), true
	}
	if !ours {
		s.Action = ActionMigrate
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonMigrating,
			"the in-tree StorageVersionMigration %s of this run is gone; creating it again", name)
		return p.finish(s, metav1.ConditionFalse, ReasonInProgress,
			"migrating objects to %s with the in-tree StorageVersionMigration %s", target, name), true
	}
	if storagemigration.PhaseOf(svm) == storagemigration.Failed {
		// The in-tree migrator never retries a Failed run: the step deletes
		// it and fails, so that it is created again after the backoff.
		reason, message := storagemigration.FailedMessage(svm)
		s.Action = ActionMigrate
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonInTreeMigrationFailed,
			"the in-tree StorageVersionMigration %s failed (%s): %s; storedVersions is not pruned", name, reason, message)
		return p.finish(s, metav1.ConditionFalse, ReasonInTreeMigrationFailed,
			"the in-tree StorageVersionMigration %s failed (%s): %s; deleting it to create it again", name, reason, message), true
	}
	// Running (or Succeeded, not yet recorded): follow it.
	s.RequeueAfter = inTreeFollowInterval
	if why := p.in.InTreeConversionFailed; why != "" {
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonConversionFailed,
			"the in-tree StorageVersionMigration %s cannot convert objects: %s", name, why)
		return p.finish(s, metav1.ConditionFalse, ReasonConversionFailed,
			"the in-tree StorageVersionMigration %s is stuck on the conversion webhook (it retries by itself; nothing is "+
				"pruned until every object is rewritten): %s", name, why), true
	}
	if prev := meta.FindStatusCondition(p.status.Conditions, graduatorv1alpha1.ConditionReady); prev != nil &&
		prev.Reason == ReasonConversionFailed {
		// The webhook converts again, but the in-tree migrator backs off
		// exponentially per retry and may wait many minutes before it
		// tries once more: a new run (a new StorageVersionMigration, from a
		// new checkpoint) starts at once.
		s.Action, s.Restart, s.RequeueAfter = ActionMigrate, true, 0
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonMigrating,
			"the conversion webhook answers again; creating the in-tree StorageVersionMigration %s again, since the "+
				"in-tree migrator backs off for minutes after an outage", name)
		return p.finish(s, metav1.ConditionFalse, ReasonInProgress,
			"migrating objects to %s with the in-tree StorageVersionMigration %s, created again after the outage", target, name), true
	}
	p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonMigrating,
		"the in-tree StorageVersionMigration %s is rewriting every %s as %s (%s, created %d times)",
		name, p.crd.Spec.Names.Plural, target, storagemigration.PhaseOf(svm), run.StorageVersionMigration.Created)
	s = p.finish(s, metav1.ConditionFalse, ReasonInProgress,
		"the in-tree StorageVersionMigration %s is migrating objects to %s", name, target)
	if p.in.Attempts > 0 {
		// Created again after a failure: creating it proved nothing, so until
		// it Succeeds Ready keeps saying why the last one failed and the
		// attempts count on (the next failure waits longer).
		s.Retries = p.in.Attempts
		if prev := meta.FindStatusCondition(p.status.Conditions, graduatorv1alpha1.ConditionReady); prev != nil {
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{
				Type: prev.Type, Status: prev.Status, Reason: prev.Reason, Message: prev.Message,
			})
		}
		SetProgress(&s.Conditions, s.Phase)
	}
	return s, true
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

// ObserveInTree records in the run the phase of the in-tree migration it
// follows (engine StorageVersionMigration). Its success does not complete
// the run: Graduator's engine verifies it first (Plan). A migration of
// another UID (an earlier run's, or one made by hand under the same name)
// says nothing of this run; a Succeeded phase, once seen, stays. The status
// is changed in place.
func ObserveInTree(status *graduatorv1alpha1.CRDVersionPolicyStatus, svm *svmv1.StorageVersionMigration) {
	run := status.Migration
	if run == nil || run.StorageVersionMigration == nil || svm == nil || svm.UID != run.StorageVersionMigration.UID ||
		run.StorageVersionMigration.Phase == string(storagemigration.Succeeded) {
		return
	}
	phase := storagemigration.PhaseOf(svm)
	run.StorageVersionMigration.Phase = string(phase)
	run.Progress = string(phase)
}

// migratedMessage is the Migrated condition's message of a finished run.
func migratedMessage(run *graduatorv1alpha1.MigrationStatus, target string) string {
	if svm := run.StorageVersionMigration; svm != nil {
		return fmt.Sprintf("every object rewritten as %s by the in-tree StorageVersionMigration %s, checked by Graduator "+
			"(%d objects it had missed rewritten, %d skipped)", target, svm.Name, run.Rewritten, run.Skipped)
	}
	return fmt.Sprintf("%d objects rewritten as %s, %d skipped", run.Rewritten, target, run.Skipped)
}

// settling reports how long to wait before the migration's checkpoint can be
// taken: discovery must advertise the new storage version and the settle
// delay must have passed since the switch was observed, so that every API
// server of an HA control plane writes the new version.
func (p *planner) settling(target string) (time.Duration, bool) {
	if !p.in.StorageSettled {
		return settlePollInterval, true
	}
	delay := DefaultSettleDelay
	if d := p.spec.Migration.SettleDelay; d != nil {
		delay = d.Duration
	}
	since := p.status.StorageVersionSince
	if since == nil || p.status.StorageVersion != target {
		return delay, delay > 0
	}
	if left := since.Add(delay).Sub(p.in.Now); left > 0 {
		return left, true
	}
	return 0, false
}

// desiredVersion is what the policy asks of one version.
type desiredVersion struct {
	name       string
	deprecate  bool
	warning    *string
	unserve    bool
	unserveAge time.Duration
}

// retirement deprecates, unserves and cleans up the listed versions.
func (p *planner) retirement(s Step, target string, gitOps bool) Step {
	var (
		toDeprecate, toUnserve, toClean, advice, waiting []string
		wait                                             time.Duration
	)
	for _, want := range p.desired() {
		v := crdVersion(p.crd, want.name)
		if v == nil {
			continue // removed from the CRD: retired for good
		}
		if want.unserve && (want.name == target || slices.Contains(p.crd.Status.StoredVersions, want.name)) {
			// Only reachable in GitOps mode (the schema forbids unserving the
			// policy's storage version, and pruning came first): the manifest
			// still stores the version.
			advice = append(advice, fmt.Sprintf("%s is still the storage version: switch storage to another version first", want.name))
			continue
		}
		if want.unserve && !apihelpers.HasServedCRDVersion(p.crd, want.name) {
			// Unserved (by us or by the manifest): only the cleanup is left.
			if p.spec.CleanupManagedFields == nil || *p.spec.CleanupManagedFields {
				if vs := p.versionStatus(want.name); vs == nil || !vs.ManagedFieldsCleaned {
					toClean = append(toClean, want.name)
				}
			}
			continue
		}
		if want.deprecate && (!v.Deprecated || !ptr.Equal(v.DeprecationWarning, want.warning)) {
			switch {
			case !gitOps:
				toDeprecate = append(toDeprecate, want.name)
			case want.unserve:
				advice = append(advice, fmt.Sprintf("%s is no longer stored: mark it deprecated, then unserve it after %s",
					want.name, want.unserveAge))
			default:
				advice = append(advice, fmt.Sprintf("%s can be marked deprecated", want.name))
			}
			continue
		}
		if want.unserve {
			left := p.graceLeft(want)
			switch {
			case left > 0:
				waiting = append(waiting, fmt.Sprintf("%s stops being served in %s", want.name, left.Round(time.Second)))
				if wait == 0 || left < wait {
					wait = left
				}
			case gitOps:
				advice = append(advice, fmt.Sprintf("%s is no longer stored: it can be unserved", want.name))
			default:
				toUnserve = append(toUnserve, want.name)
			}
		}
	}

	s.Phase = graduatorv1alpha1.PhaseRetiring
	slices.Sort(toDeprecate)
	slices.Sort(toUnserve)
	slices.Sort(toClean)
	// retire acts on versions: VersionsRetired says what is done to them
	// (condFormat), Ready what the graduation does (readyFormat).
	retire := func(action Action, versions []string, reason, condFormat, readyFormat string) Step {
		s.Action, s.Versions = action, versions
		list := strings.Join(versions, ", ")
		p.set(graduatorv1alpha1.ConditionVersionsRetired, metav1.ConditionFalse, reason, condFormat, list)
		return p.finish(s, metav1.ConditionFalse, ReasonInProgress, readyFormat, list)
	}
	switch {
	case len(toDeprecate) > 0:
		return retire(ActionDeprecate, toDeprecate, ReasonRetiring, "marking %s deprecated", "deprecating %s")
	case len(toUnserve) > 0:
		return retire(ActionUnserve, toUnserve, ReasonRetiring, "unserving %s", "unserving %s")
	case len(toClean) > 0:
		return retire(ActionCleanupManagedFields, toClean, ReasonCleaningManagedFields,
			"removing managedFields entries of %s", "cleaning managedFields of %s")
	case len(advice) > 0:
		msg := "the CRD manifest owns spec.versions (GitOps mode): " + strings.Join(advice, "; ")
		p.set(graduatorv1alpha1.ConditionVersionsRetired, metav1.ConditionFalse, ReasonAwaitingManifestChange, "%s", msg)
		s.RequeueAfter = wait
		return p.finish(s, metav1.ConditionFalse, ReasonAwaitingManifestChange, "%s", msg)
	case len(waiting) > 0:
		msg := strings.Join(waiting, "; ")
		p.set(graduatorv1alpha1.ConditionVersionsRetired, metav1.ConditionFalse, ReasonGracePeriod, "%s", msg)
		s.RequeueAfter = wait
		return p.finish(s, metav1.ConditionFalse, ReasonGracePeriod, "%s", msg)
	}
	p.set(graduatorv1alpha1.ConditionVersionsRetired, metav1.ConditionTrue, ReasonRetired,
		"every listed version is deprecated or unserved as the policy asks")
	s.Phase = graduatorv1alpha1.PhaseGraduated
	return p.finish(s, metav1.ConditionTrue, ReasonGraduated, "%s stores only %s", p.crd.Name, target)
}

// desired merges the deprecate and unserve lists: a version to unserve is
// deprecated first, so its clients get a warning during the grace period.
func (p *planner) desired() []desiredVersion {
	byName := map[string]*desiredVersion{}
	var order []string
	get := func(name string) *desiredVersion {
		if d, ok := byName[name]; ok {
			return d
		}
		d := &desiredVersion{name: name}
		byName[name] = d
		order = append(order, name)
		return d
	}
	for _, d := range p.spec.Deprecate {
		dv := get(d.Version)
		dv.deprecate = true
		if d.Warning != "" {
			w := d.Warning
			dv.warning = &w
		}
	}
	for _, u := range p.spec.Unserve {
		dv := get(u.Version)
		dv.deprecate = true
		dv.unserve = true
		if u.After != nil {
			dv.unserveAge = u.After.Duration
		}
	}
	out := make([]desiredVersion, 0, len(order))
	for _, name := range order {
		out = append(out, *byName[name])
	}
	return out
}

// graceLeft is how long a deprecated version still has to be served.
func (p *planner) graceLeft(want desiredVersion) time.Duration {
	since := p.in.Now
	if vs := p.versionStatus(want.name); vs != nil && vs.DeprecatedSince != nil {
		since = vs.DeprecatedSince.Time
	}
	return since.Add(want.unserveAge).Sub(p.in.Now)
}

func (p *planner) versionStatus(name string) *graduatorv1alpha1.VersionStatus {
	for i := range p.status.Versions {
		if p.status.Versions[i].Name == name {
			return &p.status.Versions[i]
		}
	}
	return nil
}

func (p *planner) everObserved(name string) bool {
	return p.versionStatus(name) != nil
}

// Observe records in the policy's status what the CRD looks like now, keeping
// the timestamps the plan counts from: since when the storage version is the
// current one, and since when each version is deprecated. The status is
// changed in place.
func Observe(crd *apiextensionsv1.CustomResourceDefinition, status *graduatorv1alpha1.CRDVersionPolicyStatus, now time.Time) {
	if crd == nil {
		return
	}
	stamp := metav1.NewTime(now)
	if sv := StorageVersion(crd); sv != status.StorageVersion || status.StorageVersionSince == nil {
		status.StorageVersion = sv
		status.StorageVersionSince = &stamp
	}
	status.StoredVersions = slices.Clone(crd.Status.StoredVersions)

	previous := status.Versions
	var versions []graduatorv1alpha1.VersionStatus
	for _, v := range crd.Spec.Versions {
		vs := graduatorv1alpha1.VersionStatus{Name: v.Name, Served: v.Served, Storage: v.Storage, Deprecated: v.Deprecated}
		for _, old := range previous {
			if old.Name != v.Name {
				continue
			}
			if v.Deprecated && old.DeprecatedSince != nil {
				vs.DeprecatedSince = old.DeprecatedSince
			}
			vs.ManagedFieldsCleaned = old.ManagedFieldsCleaned && !v.Served
		}
		if v.Deprecated && vs.DeprecatedSince == nil {
			vs.DeprecatedSince = &stamp
		}
		versions = append(versions, vs)
	}
	// Versions removed from the CRD stay listed, so a policy naming them is
	// known to be about a retired version rather than a typo.
	for _, old := range previous {
		if crdVersion(crd, old.Name) == nil {
			old.Served, old.Storage = false, false
			versions = append(versions, old)
		}
	}
	status.Versions = versions
}

// StorageVersion returns the name of the CRD's storage version, or "".
func StorageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	v, _ := apihelpers.GetCRDStorageVersion(crd) // none: ""
	return v
}

// ResourceAt is the resource of the CRD's objects at version, as clients
// address it.
func ResourceAt(crd *apiextensionsv1.CustomResourceDefinition, version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: crd.Spec.Group, Version: version, Resource: crd.Spec.Names.Plural}
}

// StaleStoredVersions returns the versions in status.storedVersions that are
// not the storage version: the drift the operator reports for CRDs without a
// policy.
func StaleStoredVersions(crd *apiextensionsv1.CustomResourceDefinition) []string {
	storage := StorageVersion(crd)
	var stale []string
	for _, v := range crd.Status.StoredVersions {
		if v != storage {
			stale = append(stale, v)
		}
	}
	return stale
}

func crdVersion(crd *apiextensionsv1.CustomResourceDefinition, name string) *apiextensionsv1.CustomResourceDefinitionVersion {
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == name {
			return &crd.Spec.Versions[i]
		}
	}
	return nil
}

func versionNames(crd *apiextensionsv1.CustomResourceDefinition) []string {
	names := make([]string, 0, len(crd.Spec.Versions))
	for _, v := range crd.Spec.Versions {
		names = append(names, v.Name)
	}
	return names
}

func listedVersions(spec graduatorv1alpha1.CRDVersionPolicySpec) []string {
	var names []string
	for _, d := range spec.Deprecate {
		names = append(names, d.Version)
	}
	for _, u := range spec.Unserve {
		if !slices.Contains(names, u.Version) {
			names = append(names, u.Version)
		}
	}
	return names
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

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}
