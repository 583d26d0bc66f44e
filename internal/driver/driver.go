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

// Package driver carries out a graduation. graduation.Plan decides the next
// step; the Driver performs it and asks again, until a step has to wait. It
// is the one sequence of the graduation, entered through four doors that
// each supply only what differs:
//
//   - where the graduation's state lives (a Store): the CRDVersionPolicy's
//     status for the operator, an annotation on the CRD for the embedded
//     controller (package crdmigrate), memory for the CLI and the rehearsal
//     kit (package graduationtest);
//   - how it reports (a Reporter): conditions, Events and metrics, Events on
//     the CRD, a progress bar, a test's log;
//   - which steps the door takes (Driver.Allows): the CLI migrates and, when
//     asked, prunes; GitOps mode never writes spec.versions because Plan
//     never plans it.
package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/apiservers"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/migration"
)

// Event reasons of the steps, besides the stall reasons of package
// graduation (a step that fails) and the phases (a phase change, on a
// policy). They are contracts: alerts and runbooks match on them.
const (
	ReasonMigrationStarted     = "MigrationStarted"
	ReasonMigrationCompleted   = "MigrationCompleted"
	ReasonMigrationFailed      = graduation.ReasonMigrationFailed
	ReasonStoredVersionsPruned = "StoredVersionsPruned"
	ReasonStorageSwitched      = "StorageVersionSwitched"
	ReasonVersionServed        = "VersionServed"
	ReasonVersionsDeprecated   = "VersionsDeprecated"
	ReasonVersionsUnserved     = "VersionsUnserved"
	ReasonManagedFieldsCleaned = "ManagedFieldsCleaned"
	ReasonRecovered            = "Recovered"
	// ReasonWaitingForCompaction: the migration's etcd space budget is
	// spent and the run waits for etcd's next compaction (the first wait
	// of a run; the status follows every wait).
	ReasonWaitingForCompaction = "WaitingForCompaction"
)

// maxSteps bounds how many steps one Run takes in a row (preflight,
// switch, migrate, prune, ...), so a CRD that keeps changing cannot hold a
// worker forever.
const maxSteps = 8

// Store keeps one policy's graduation between steps and between runs.
type Store interface {
	// Load returns the policy (spec and status) to plan from, never older
	// than this store's last Save; nil when the policy is gone.
	Load(ctx context.Context) (*graduatorv1alpha1.CRDVersionPolicy, error)
	// Save writes policy.Status, when it changed since the last Save. It
	// refuses to write over a status that changed since this store last
	// loaded or saved it (an optimistic lock), with an error for which
	// apierrors.IsConflict is true: the status never goes back in time.
	Save(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy) error
}

// Reporter tells people what the graduation does.
type Reporter interface {
	// Event tells a step's outcome: the run started or completed, a
	// stall's first failure, a recovery, a version switched or retired.
	// crd is nil when the CRD does not exist.
	Event(policy *graduatorv1alpha1.CRDVersionPolicy, crd *apiextensionsv1.CustomResourceDefinition,
		eventType, reason, action, message string)
	// Planned is called with every plan the driver records in the status,
	// with the phase before it.
	Planned(policy *graduatorv1alpha1.CRDVersionPolicy, step graduation.Step, previous graduatorv1alpha1.Phase)
}

// Metrics receives what the driver measures, for a door that exports it
// (metrics.Recorder in a manager); the CLI and the rehearsal kit set none.
type Metrics interface {
	// RunStarted and RunEnded bracket a migration run of crd.
	RunStarted(crd string)
	RunEnded(crd string)
	// Counted adds the objects rewritten, skipped and failed since the
	// last call.
	Counted(crd string, rewritten, skipped, failed int64)
	// Progressed tells the writers in flight and the fraction done.
	Progressed(crd string, writers int, fraction float64)
	// Completed tells how long a complete run took.
	Completed(crd string, took time.Duration)
	// StepFailed counts a failed attempt of a step, with its stall reason.
	StepFailed(crd, step, reason string)
}

// noMetrics measures nothing.
type noMetrics struct{}

func (noMetrics) RunStarted(string)                   {}
func (noMetrics) RunEnded(string)                     {}
func (noMetrics) Counted(string, int64, int64, int64) {}
func (noMetrics) Progressed(string, int, float64)     {}
func (noMetrics) Completed(string, time.Duration)     {}
func (noMetrics) StepFailed(crd, step, reason string) {}

// Clients are how the driver reads and writes the cluster.
type Clients struct {
	// Client patches CRDs (storage flags, storedVersions) and creates and
	// deletes in-tree StorageVersionMigrations.
	Client client.Client
	// Reader reads CRDs and StorageVersionMigrations uncached, so a step
	// always plans on the CRD as the previous step left it.
	Reader client.Reader
	// Dynamic reads and dry-run writes objects (preflight, managedFields
	// cleanup).
	Dynamic dynamic.Interface
	// Config is what the migration engine builds its own client from:
	// object metadata only, and throttling seen at once.
	Config *rest.Config
	// Discovery tells whether the storage version is advertised.
	Discovery discovery.DiscoveryInterface
	// Reviews asks the API server what the caller may do before a preflight
	// or a migration writes anything.
	Reviews authorizationv1client.SelfSubjectAccessReviewInterface
}

// Driver performs the steps graduation.Plan returns. One Driver serves every
// policy of a door; Run is safe to call for different policies at once.
type Driver struct {
	Clients
	Reporter Reporter
	// Metrics receives the driver's measurements; nil measures nothing.
	Metrics Metrics
	// Allows says which actions the door takes; nil allows all. When the
	// plan's next action is not allowed, Run returns with Outcome.Held.
	Allows func(graduation.Action) bool
	// Needs lists rights the door needs beyond migrating the objects
	// (access.Needs), checked with them before anything is written: the
	// embedded controller's right to write on the CRD and to create Events.
	Needs func(crd *apiextensionsv1.CustomResourceDefinition) []authorizationv1.ResourceAttributes
	// Engine, when set, is the engine's options for every run of this
	// door, as the door has them (the CLI's flags, crdmigrate.Options, a
	// rehearsal's tuning) with its callbacks: the tuning goes to the engine
	// as it is. The driver sets only what a run knows: the Resource, the
	// Config, the progress to Resume, the WriteTo the plan checked (the
	// policy's), etcd's quota and where it is told. When nil, a run's
	// options are the policy's spec.migration: the operator's door.
	Engine *migration.Options
	// EtcdQuota is etcd's space quota in bytes when the door knows it (the
	// manager's --etcd-quota), for a policy that sets none: it sharpens the
	// migration's space budget. 0 when unknown.
	EtcdQuota int64
	// RewriteAll rewrites every object once even when storedVersions holds
	// only the storage version (graduation.Input.RewriteAll).
	RewriteAll bool
	// EtcdQuotaSetting names where a person tells this door etcd's quota
	// (the CLI's --etcd-quota, say), quoted when a run waits for a
	// compaction with the quota not told; the policy's field when empty.
	EtcdQuotaSetting string
	// AcceptLoss is where this door accepts the paths a conversion loses
	// (the CLI's --accept-loss flags, a library's option), told when the
	// round-trip proof refuses; the policy's spec.migration.acceptLoss when
	// empty.
	AcceptLoss graduation.AcceptLoss
	// Clock is the time source; a real clock when nil.
	Clock clock.PassiveClock

	runs   runningMigrations
	agreed agreements

	checkerOnce   sync.Once
	serverChecker *apiservers.Checker
}

func (d *Driver) metrics() Metrics {
	if d.Metrics == nil {
		return noMetrics{}
	}
	return d.Metrics
}

// Outcome is where Run stopped.
type Outcome struct {
	// Step is the last plan: the phase and conditions the status holds.
	Step graduation.Step
	// RequeueAfter is when to run again; 0 when nothing is planned.
	RequeueAfter time.Duration
	// Stall is set when a step failed: why, and when to try again.
	Stall *graduation.Stall
	// Err is the error of the failed step (with Stall).
	Err error
	// Held is set when the next action is one the door does not take.
	Held bool
}

// Done reports a plan with nothing left to do: the graduation holds, or
// waits for a person (paused, blocked).
func (o Outcome) Done() bool {
	return o.Stall == nil && !o.Held && o.Step.Action == graduation.ActionNone
}

// Failure is why a one-shot door stops short of what it asked for: the
// error of a step that failed (a one-shot door does not retry it), or the
// message of a plan blocked on a person. nil when the outcome holds, waits
// or is held: what a door makes of those is its own.
func (o Outcome) Failure() error {
	switch {
	case o.Stall != nil:
		return o.Err
	case o.Step.Phase == graduatorv1alpha1.PhaseBlocked:
		return fmt.Errorf("%s (%s)", o.Step.Message(), o.Step.Reason())
	}
	return nil
}

// run is what one Run knows of its policy's graduation.
type run struct {
	store  Store
	policy *graduatorv1alpha1.CRDVersionPolicy
	// crd is the CRD as last read (nil: it does not exist).
	crd *apiextensionsv1.CustomResourceDefinition
	// preflight is the result of this run's preflight, for the next plan.
	preflight *graduation.PreflightResult
	// svm is the in-tree migration named after the CRD as last read (engine
	// StorageVersionMigration; nil: none, or another engine).
	svm *svmv1.StorageVersionMigration
	// servers is what asking every API server found when the CRD was last
	// read, for the run that starts on it.
	servers apiservers.Verdict
}

// Run performs the next steps of policy's graduation: observe the CRD,
// plan, perform the step the plan names (see steps), and again, until a
// step has to wait, fails, or is not the door's to take. graduation.Plan
// alone decides the phase and the conditions, a failed step included. The
// status is saved once when Run returns, and after each page of a running
// migration.
func (d *Driver) Run(ctx context.Context, store Store, policy *graduatorv1alpha1.CRDVersionPolicy) (out Outcome, err error) {
	g := &run{store: store, policy: policy}
	defer func() {
		// Saved whatever path returns, also when the caller is stopping.
		err = errors.Join(err, store.Save(context.WithoutCancel(ctx), policy))
	}()
	for range maxSteps {
		in, failed := d.observe(ctx, g)
		if failed != nil {
			if ctx.Err() != nil {
				return Outcome{}, failed.Err // stopping: not a failure of the read
			}
			return d.stalled(ctx, g, in, failed), nil
		}
		step := graduation.Plan(in)
		d.record(g, step, in.Now)
		log.FromContext(ctx).V(1).Info("planned", "action", step.Action, "phase", step.Phase, "reason", step.Reason())
		if step.Action == graduation.ActionNone {
			return Outcome{Step: step, RequeueAfter: step.RequeueAfter}, nil
		}
		if d.Allows != nil && !d.Allows(step.Action) {
			return Outcome{Step: step, Held: true}, nil
		}
		if err := d.take(ctx, g, step); err != nil {
			if ctx.Err() != nil {
				return Outcome{Step: step}, err // stopping: not a failure of the step
			}
			return d.stalled(ctx, g, in, &graduation.StepError{Step: string(step.Action), Err: err}), nil
		}
		def := d.steps()[step.Action]
		if def.check {
			continue // its result is the next plan's input
		}
		if def.recovers == nil || def.recovers(g) {
			d.recovered(g, in, step)
		}
		g.preflight = nil
		// Plan the next step on the policy as it is now: a pause or a new
		// target set while the step ran must stop the graduation here.
		fresh, err := store.Load(ctx)
		if err != nil {
			return Outcome{Step: step}, fmt.Errorf("reread policy %s: %w", policy.Name, err)
		}
		if fresh == nil {
			return Outcome{Step: step}, nil
		}
		policy.Spec, policy.Generation = fresh.Spec, fresh.Generation
	}
	// Still steps to take: come back at once, through the caller's queue so
	// that other CRDs get their turn.
	return Outcome{RequeueAfter: time.Second}, nil
}

// observe reads what Plan looks at: the CRD (uncached) and whether
// discovery advertises its storage version. A read that fails is returned
// as the step that failed.
func (d *Driver) observe(ctx context.Context, g *run) (graduation.Input, *graduation.StepError) {
	in := graduation.Input{Policy: g.policy, Now: d.now(), Preflight: g.preflight, Attempts: g.policy.Status.Retries,
		RewriteAll: d.RewriteAll}
	g.crd = nil
	crd, err := d.getCRD(ctx, g.policy.Name)
	if err != nil {
		return in, &graduation.StepError{Step: "GetCRD", Err: err}
	}
	g.crd, in.CRD = crd, crd
	graduation.Observe(crd, &g.policy.Status, in.Now)
	if g.svm, err = d.getInTreeMigration(ctx, g.policy, crd); err != nil {
		return in, &graduation.StepError{Step: "GetStorageVersionMigration", Err: err}
	}
	in.StorageVersionMigration = g.svm
	graduation.ObserveInTree(&g.policy.Status, g.svm)
	in.InTreeConversionFailed = d.inTreeConversion(ctx, g.policy, crd, g.svm)
	if in.StorageSettled, err = StorageSettled(ctx, d.Discovery, crd); err != nil {
		return in, &graduation.StepError{Step: graduation.StepDiscovery, Err: err}
	}
	in.APIServers, in.AgreedSince = d.checkServers(ctx, crd, in.Now)
	g.servers = in.APIServers
	return in, nil
}

// take performs one step, with one log line when it starts and one when it
// ends.
func (d *Driver) take(ctx context.Context, g *run, s graduation.Step) error {
	def, ok := d.steps()[s.Action]
	if !ok {
		return fmt.Errorf("unknown action %q", s.Action)
	}
	logger := log.FromContext(ctx).WithValues("policy", klog.KObj(g.policy), "step", s.Action, "storageVersion", s.StorageVersion)
	if len(s.Versions) > 0 {
		logger = logger.WithValues("versions", s.Versions)
	}
	logger.Info("step started")
	start := d.now()
	var err error
	if def.checkAccess {
		err = d.mayMigrate(ctx, g.policy, g.crd, s.StorageVersion)
	}
	if err == nil {
		err = def.perform(ctx, g, s)
	}
	done := []any{"duration", d.now().Sub(start).Round(time.Millisecond), "succeeded", err == nil}
	if r := g.policy.Status.Migration; s.Action == graduation.ActionMigrate && r != nil {
		done = append(done, "listed", r.Listed, "rewritten", r.Rewritten, "skipped", r.Skipped, "failed", r.Failed,
			"caughtUp", r.CaughtUp, "sweep", r.Sweep)
	}
	if s.Action == graduation.ActionPreflight && g.preflight != nil {
		done = append(done, "passed", g.preflight.Passed, "reason", g.preflight.Reason)
	}
	logger.Info("step finished", done...)
	return err
}

// stalled records a step (or a read) that failed: Plan, told of the
// failure, keeps the phase and the other conditions and says why in Ready,
// and counts the attempt in status.retries; the caller retries after the
// backoff (5s doubling to 5m). An Event marks the first failure only, and
// another one the recovery (recovered).
func (d *Driver) stalled(ctx context.Context, g *run, in graduation.Input, failed *graduation.StepError) Outcome {
	in.Failed = failed
	s := graduation.Plan(in)
	d.record(g, s, in.Now)
	d.metrics().StepFailed(g.policy.Name, failed.Step, s.Stall.Reason)
	if s.Retries == 1 {
		d.Reporter.Event(g.policy, g.crd, corev1.EventTypeWarning, s.Stall.Reason, failed.Step, s.Stall.Message)
	}
	log.FromContext(ctx).Error(failed.Err, "step failed; retrying", "policy", klog.KObj(g.policy), "step", failed.Step,
		"reason", s.Stall.Reason, "attempt", s.Retries, "retryAfter", s.Stall.RetryAfter)
	return Outcome{Step: s, RequeueAfter: s.RequeueAfter, Stall: s.Stall, Err: failed.Err}
}

// recovered ends a stall once a step succeeded again: Plan, told there is
// no failure left to report, puts Ready back, and one Event tells the
// recovery.
func (d *Driver) recovered(g *run, in graduation.Input, s graduation.Step) {
	attempts := g.policy.Status.Retries
	if attempts == 0 {
		return
	}
	in.Attempts = 0
	d.record(g, graduation.Plan(in), d.now())
	d.Reporter.Event(g.policy, g.crd, corev1.EventTypeNormal, ReasonRecovered, string(s.Action),
		fmt.Sprintf("%s succeeded again after %d failed attempts", s.Action, attempts))
}

// record puts the plan's phase, conditions and retry count into the
// policy's status (saved when Run returns) and tells the reporter.
func (d *Driver) record(g *run, step graduation.Step, now time.Time) {
	policy := g.policy
	previous := policy.Status.Phase
	policy.Status.ObservedGeneration = policy.Generation
	policy.Status.Phase = step.Phase
	policy.Status.Retries = step.Retries
	for _, c := range step.Conditions {
		c.ObservedGeneration = policy.Generation
		c.LastTransitionTime = metav1.NewTime(now)
		meta.SetStatusCondition(&policy.Status.Conditions, c)
	}
	d.Reporter.Planned(policy, step, previous)
}

// getCRD returns the CRD, or nil when it does not exist.
func (d *Driver) getCRD(ctx context.Context, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := d.Reader.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get CRD %s: %w", name, err)
	}
	return crd, nil
}

func (d *Driver) now() time.Time {
	if d.Clock == nil {
		return time.Now()
	}
	return d.Clock.Now()
}

// ClientsFor builds the clients a door's driver reads and writes with from
// cfg: c and reader are the door's own (a manager's cached client and its
// API reader); when c is nil, one client of cfg serves both, knowing
// apiextensions.k8s.io/v1.
func ClientsFor(cfg *rest.Config, c client.Client, reader client.Reader) (Clients, error) {
	if c == nil {
		scheme := runtime.NewScheme()
		if err := apiextensionsv1.AddToScheme(scheme); err != nil {
			return Clients{}, err
		}
		var err error
		if c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
			return Clients{}, fmt.Errorf("create the client: %w", err)
		}
		reader = c
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("create the dynamic client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("create the discovery client: %w", err)
	}
	authz, err := authorizationv1client.NewForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("create the authorization client: %w", err)
	}
	return Clients{Client: c, Reader: reader, Dynamic: dyn, Config: cfg, Discovery: disco,
		Reviews: authz.SelfSubjectAccessReviews()}, nil
}
