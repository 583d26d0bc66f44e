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
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/apiservers"
)

// Action is what the reconciler does for a Step.
type Action string

const (
	// ActionNone: nothing to do now; requeue after Step.RequeueAfter if set.
	ActionNone Action = "None"
	// ActionPreflight: run the preflight checks against Step.StorageVersion
	// and plan again with their result.
	ActionPreflight Action = "Preflight"
	// ActionServe: set served: true on Step.StorageVersion, so that it can
	// be read, proved and settled before it becomes (or while it is) the
	// storage version.
	ActionServe Action = "Serve"
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
	ReasonPaused                  = "Paused"
	ReasonCRDNotFound             = "CRDNotFound"
	ReasonUnknownVersion          = "UnknownVersion"
	ReasonVersionNotServed        = "VersionNotServed"
	ReasonConversionNotConfigured = "ConversionNotConfigured"
	ReasonPreflightPending        = "PreflightPending"
	ReasonPreflightFailed         = "PreflightFailed"
	ReasonPreflightSucceeded      = "PreflightSucceeded"
	ReasonSwitchPending           = "SwitchPending"
	ReasonStorageVersionSet       = "StorageVersionSet"
	ReasonSettling                = "Settling"
	// ReasonServersBehind: storedVersions is not pruned while an API server
	// is found writing another version, or while the servers checked before
	// the run cannot be asked again.
	ReasonServersBehind            = "APIServersBehind"
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
	// DefaultSettleDelay is used when the policy sets none, and the API
	// servers cannot be asked one by one.
	DefaultSettleDelay = 10 * time.Second
	// ServersSettle is how long the migration waits once every API server
	// was found serving the new storage version's hash, in place of the
	// settle delay: an API server updates its discovery a moment before the
	// CRD handler it serves writes with the new storage version
	// (kubernetes#130235), so a hash seen is not yet a write in that version.
	ServersSettle = 2 * time.Second
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
	// Lost are, for a lossy conversion, the paths the proof found lost, and
	// AcceptLoss where a person accepts them at the door that ran it.
	Lost       []string
	AcceptLoss AcceptLoss
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
	// APIServers is what asking every API server one by one for the
	// storage version's hash found, while storedVersions lists another
	// version; the zero Verdict when they were not asked.
	APIServers apiservers.Verdict
	// AgreedSince is when every API server was first found serving the
	// storage version's hash, in the latest unbroken run of Agree verdicts.
	AgreedSince time.Time
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
	// RewriteAll asks for every object rewritten once in the storage version
	// even when status.storedVersions holds only that version (`graduator
	// migrate --force`: re-encryption at rest after a key rotation); a
	// complete run of this CRD generation satisfies it.
	RewriteAll bool
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
