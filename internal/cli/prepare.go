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

package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authorizationv1 "k8s.io/api/authorization/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/access"
	"github.com/graduator/graduator/internal/driver"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/internal/prepare"
	"github.com/graduator/graduator/internal/scan"
	"github.com/graduator/graduator/migration"
)

// defaultPrepareParallel is how many clusters `graduator prepare` works on
// at once unless told: each runs a migration that takes what its API server
// gives, and the CLI's own CPU is shared between them.
const defaultPrepareParallel = 3

// PrepareOptions is `graduator prepare` in kubectl's plugin shape: Complete
// reads the flags, the release and the kubeconfig and refuses bad input
// before any cluster is read; Run prepares every cluster.
type PrepareOptions struct {
	genericiooptions.IOStreams
	// scan reads the release (--against) and the clusters as `graduator
	// scan` does.
	scan *ScanOptions

	dryRun bool
	// exitCode is --exit-code: with --dry-run, ExitPlanned when some
	// cluster has work planned.
	exitCode bool
	engineFlags
}

// NewCmdPrepare is `graduator prepare`.
func NewCmdPrepare(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &PrepareOptions{IOStreams: streams, scan: NewScanOptions(flags, streams), engineFlags: newEngineFlags()}
	o.scan.output = ""
	cmd := &cobra.Command{
		Use:   "prepare --against RELEASE",
		Short: "Make every cluster ready for a release: migrate and prune what it would trip on",
		Long: `Reads each cluster as graduator scan --against does, and plans, for the CRDs the release
ships, what would make the release fail or lose data there:

  - status.storedVersions lists a version the release drops (the API server refuses it),
  - or a version the release stops serving, or the cluster no longer serves.

Each such CRD is then migrated as graduator migrate --prune does it: the round-trip proof
first (a lossy conversion refuses that CRD, and nothing of it is written), every object
rewritten in the storage version at background priority, then status.storedVersions
pruned to it, never before a complete pass. Everything else the scan finds is reported,
not acted on. A storage version the cluster does not serve is served first.

A rollback (the release drops the version every object is stored in and stores an older
one) is a graduation backwards: the older version is served if it is not (its schema
from the cluster's CRD, or from the release when the cluster's CRD no longer lists it),
the round trip newer -> older -> newer proved (a loss refuses, naming the paths, unless
--accept-loss names them), the older version made the storage version, every object
rewritten in it and status.storedVersions pruned to it. The conversion is served by the
cluster's current webhook until the rewrite ends: keep it running.

A CRD whose storage version the release drops for a newer one, or whose conversion
webhook has no ready endpoint, is refused. --dry-run prints the plan and writes nothing.

Clusters run in parallel (--parallel), the CRDs of one cluster one after another, each
cluster with clients of its own. Before anything is written in a cluster, the caller's
rights there are checked for every CRD of its plan; a missing one refuses that cluster,
naming the rule to add, and the others go on.

Interrupted (Ctrl-C, a lost connection, a CI job's timeout), the same command resumes:
each CRD's progress is kept on the CRD, in the annotation ` + driver.StateAnnotation + `, from
its first write on, and a rerun goes on from the last page saved without rewriting what
was rewritten.

On a terminal one line per cluster shows its current CRD, progress, rate and ETA, then its
outcome; otherwise a line is printed on stderr per event. -o json prints the outcome per
cluster and CRD with the times. The summary says per cluster: Ready, Refused (and why) or
Unreachable.

Exits 0 when every cluster is ready for the release, 1 when some cluster refused (a person
must act there), 2 on bad input or when a cluster could not be read or was not finished
(unreachable, interrupted): run it again. With --dry-run --exit-code (git diff --exit-code's
convention), 3 when no cluster refused or went unread but some cluster has work planned; 0
then means nothing to do anywhere.`,
		Example: `  graduator prepare --against release/crds/ --all-contexts --dry-run
  helm template my-app chart/ | graduator prepare --against - --context prod-eu,prod-us
  graduator prepare --against crds.yaml --all-contexts --parallel 5 -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(cmd.Context()); err != nil {
				return badInput(err)
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return badInput(err) })
	o.scan.clusters.addFlags(cmd.Flags())
	o.scan.clusters.parallel = defaultPrepareParallel
	cmd.Flags().Lookup("parallel").DefValue = fmt.Sprint(defaultPrepareParallel)
	cmd.Flags().Lookup("parallel").Usage = "How many clusters are prepared at once."
	cmd.Flags().StringSliceVar(&o.scan.against, "against", nil,
		"The manifests the release is about to apply (a file, a directory, or - for stdin; repeat for more).")
	cmd.Flags().StringVarP(&o.scan.output, "output", "o", "", "Output format: json prints the outcome per cluster and CRD.")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "Print the plan of each cluster and write nothing.")
	cmd.Flags().BoolVar(&o.exitCode, "exit-code", false,
		fmt.Sprintf("With --dry-run, exit %d when some cluster has work planned (as git diff --exit-code), 0 only when there is nothing to do.", ExitPlanned))
	o.addFlags(cmd.Flags(), " in each cluster")
	return cmd
}

// Complete refuses bad input before any cluster is read.
func (o *PrepareOptions) Complete(ctx context.Context) error {
	switch {
	case o.scan.output != "" && o.scan.output != "json":
		return fmt.Errorf("unknown output format %q: use json or leave it out", o.scan.output)
	case len(o.scan.against) == 0:
		return errors.New("--against is required: the manifests of the release to prepare for")
	case o.exitCode && !o.dryRun:
		return errors.New("--exit-code needs --dry-run: it tells whether work is planned, without doing it")
	}
	if err := o.validate(); err != nil {
		return err
	}
	if err := o.scan.clusters.validate(); err != nil {
		return err
	}
	if err := o.scan.loadRelease(ctx); err != nil {
		return err
	}
	var err error
	o.scan.targets, err = o.scan.clusters.clusters(o.scan.flags)
	return err
}

// Outcomes of a cluster and of a CRD. The JSON output carries them: a
// contract.
const (
	// OutcomeReady: the release applies here without failing or losing
	// data.
	OutcomeReady = "Ready"
	// OutcomeRefused: a person must act here (Why says what).
	OutcomeRefused = "Refused"
	// OutcomeUnreachable: the cluster could not be read.
	OutcomeUnreachable = "Unreachable"
	// OutcomeUnfinished: the run stopped before the cluster was ready
	// (interrupted, or a step failed): running it again goes on.
	OutcomeUnfinished = "Unfinished"
	// OutcomePlanned: --dry-run; the plan would be carried out.
	OutcomePlanned = "Planned"
)

// PreparedCluster is one cluster of `graduator prepare -o json`. The JSON
// field names are a contract.
type PreparedCluster struct {
	Outcome string        `json:"outcome"`
	Why     string        `json:"why,omitempty"`
	Error   *ClusterError `json:"error,omitempty"`
	CRDs    []PreparedCRD `json:"crds"`
	// Reported is what the scan found and prepare does not act on.
	Reported   []scan.Finding `json:"reported"`
	StartedAt  time.Time      `json:"startedAt"`
	FinishedAt time.Time      `json:"finishedAt"`
}

// PreparedCRD is one CRD of a cluster's plan and what became of it.
type PreparedCRD struct {
	prepare.CRDPlan `json:",inline"`
	Outcome         string `json:"outcome"`
	// Refused says why the CRD was refused or left unfinished.
	Refused   string `json:"refused,omitempty"`
	Listed    int64  `json:"listed"`
	Rewritten int64  `json:"rewritten"`
	Skipped   int64  `json:"skipped"`
	Failed    int64  `json:"failed"`
	Pruned    bool   `json:"pruned"`
	// APIServers says how the API servers were checked before the CRD's
	// first write: every one found serving the storage version, or why
	// they could not be asked one by one.
	APIServers string `json:"apiServers,omitempty"`
	// StoredVersions is status.storedVersions when the CRD was done.
	StoredVersions []string   `json:"storedVersions,omitempty"`
	StartedAt      *time.Time `json:"startedAt,omitempty"`
	FinishedAt     *time.Time `json:"finishedAt,omitempty"`
}

// Run prepares every cluster and reports; see the command's exit codes.
func (o *PrepareOptions) Run(ctx context.Context) error {
	targets := o.scan.targets
	view := newFleetView(o.ErrOut, targets, pickProgressMode(o.ErrOut, false, o.scan.output == "json"))
	defer view.stop()
	untimed := make([]cluster, len(targets))
	for i, t := range targets {
		untimed[i] = t
		untimed[i].Timeout = 0 // the read has its timeout; a migration takes as long as it takes
	}
	results, errs := eachCluster(ctx, untimed, o.scan.clusters.parallel, func(ctx context.Context, cfg *rest.Config) (PreparedCluster, error) {
		i := slices.IndexFunc(targets, func(t cluster) bool { return t.Config == cfg })
		pc, err := o.prepareCluster(ctx, targets[i], view.cluster(i))
		if err != nil {
			pc.Outcome, pc.Error = OutcomeUnreachable, clusterError(err)
			pc.Why = pc.Error.Reason + ": " + pc.Error.Message
		}
		view.cluster(i).finished(pc)
		return pc, nil
	})
	out := map[string]PreparedCluster{}
	contexts := make([]string, len(targets))
	for i, t := range targets {
		contexts[i] = t.Context
		pc := results[i]
		if errs[i] != nil { // its kubeconfig entry did not make a client
			pc.Outcome, pc.Error = OutcomeUnreachable, clusterError(errs[i])
			pc.Why = pc.Error.Reason + ": " + pc.Error.Message
			view.cluster(i).finished(pc)
		}
		if pc.CRDs == nil {
			pc.CRDs = []PreparedCRD{}
		}
		if pc.Reported == nil {
			pc.Reported = []scan.Finding{}
		}
		out[t.Context] = pc
	}
	view.stop()
	if o.scan.output == "json" {
		if err := printJSON(o.Out, out, &printers.JSONPrinter{}); err != nil {
			return err
		}
	} else {
		printPrepared(o.Out, contexts, out)
	}
	return prepareVerdict(contexts, out, o.exitCode)
}

// prepareVerdict is the exit: 1 when a cluster refused (a person must act
// there, whatever the others say), else 2 when one was not read or not
// finished (running again may be enough), else, when planned counts (a dry
// run's --exit-code), 3 when one has work planned, else none (0).
func prepareVerdict(contexts []string, out map[string]PreparedCluster, planned bool) error {
	by := map[string][]string{}
	for _, name := range contexts {
		by[out[name].Outcome] = append(by[out[name].Outcome], name)
	}
	switch {
	case len(by[OutcomeRefused]) > 0:
		return &exitError{code: ExitError, err: fmt.Errorf("%d of %d clusters refused: %s", len(by[OutcomeRefused]), len(contexts),
			strings.Join(by[OutcomeRefused], ", "))}
	case len(by[OutcomeUnreachable])+len(by[OutcomeUnfinished]) > 0:
		not := append(by[OutcomeUnreachable], by[OutcomeUnfinished]...)
		return &exitError{code: ExitBadInput, err: fmt.Errorf("%d of %d clusters were not read or not finished: %s; run the same command again",
			len(not), len(contexts), strings.Join(not, ", "))}
	case planned && len(by[OutcomePlanned]) > 0:
		return &exitError{code: ExitPlanned, err: fmt.Errorf("%d of %d clusters have work planned: %s", len(by[OutcomePlanned]),
			len(contexts), strings.Join(by[OutcomePlanned], ", "))}
	}
	return nil
}

// prepareCluster reads one cluster as the scan does, plans, checks the
// caller's rights for the whole plan, then carries the plan out one CRD
// after another. An error is a cluster that could not be read (or whose
// rights could not be reviewed).
func (o *PrepareOptions) prepareCluster(ctx context.Context, t cluster, view *clusterView) (pc PreparedCluster, _ error) {
	pc.StartedAt = time.Now()
	defer func() { pc.FinishedAt = time.Now() }()
	readCtx, cancel := context.WithTimeout(ctx, t.Timeout)
	c, _, err := readCluster(readCtx, t.Config, o.scan.release, o.scan.config)
	cancel()
	if err != nil {
		if ctx.Err() == nil && readCtx.Err() != nil {
			err = fmt.Errorf("no answer within %s (--request-timeout): %w", t.Timeout, err)
		}
		return pc, err
	}
	c.Against, c.Context = o.scan.against, t.Context
	plan := prepare.For(c)
	pc.Reported = plan.Reported
	for _, p := range plan.CRDs {
		crd := PreparedCRD{CRDPlan: p, Outcome: OutcomePlanned}
		if p.Verdict == prepare.Refuse {
			crd.Outcome, crd.Refused = OutcomeRefused, strings.Join(p.Why, "; ")
		}
		pc.CRDs = append(pc.CRDs, crd)
	}
	view.planned(plan)
	d, err := o.driver(t.Config, view)
	if err != nil {
		return pc, err
	}
	if why, err := o.mayPrepare(ctx, d, &c, plan); err != nil {
		return pc, err
	} else if why != "" {
		pc.Outcome, pc.Why = OutcomeRefused, why
		for i := range pc.CRDs {
			if pc.CRDs[i].Outcome == OutcomePlanned {
				pc.CRDs[i].Outcome, pc.CRDs[i].Refused = OutcomeRefused, "not started: a right is missing in this cluster"
			}
		}
		return pc, nil
	}
	if o.dryRun {
		pc.Outcome = clusterOutcome(pc.CRDs, OutcomePlanned)
		return pc, nil
	}
	for i := range pc.CRDs {
		if pc.CRDs[i].Verdict == prepare.Refuse {
			continue
		}
		if ctx.Err() != nil {
			pc.CRDs[i].Outcome, pc.CRDs[i].Refused = OutcomeUnfinished, "interrupted before it started"
			continue
		}
		view.started(i, pc.CRDs[i].CRD)
		o.prepareCRD(ctx, d, &pc.CRDs[i])
		view.crdDone(pc.CRDs[i])
	}
	pc.Outcome = clusterOutcome(pc.CRDs, OutcomeReady)
	pc.Why = clusterWhy(pc.CRDs)
	return pc, nil
}

// clusterOutcome: Refused when a CRD was refused, Unfinished when one was
// not finished, else done (Ready, or Planned for a dry run with a plan).
func clusterOutcome(crds []PreparedCRD, done string) string {
	outcome := OutcomeReady
	for _, c := range crds {
		switch c.Outcome {
		case OutcomeRefused:
			return OutcomeRefused
		case OutcomeUnfinished:
			outcome = OutcomeUnfinished
		case OutcomePlanned:
			if outcome == OutcomeReady {
				outcome = done
			}
		}
	}
	return outcome
}

// clusterWhy names the CRDs refused or unfinished and why.
func clusterWhy(crds []PreparedCRD) string {
	var why []string
	for _, c := range crds {
		if c.Refused != "" {
			why = append(why, c.CRD+": "+c.Refused)
		}
	}
	return strings.Join(why, "; ")
}

// mayPrepare checks, before anything is written in the cluster, that the
// caller may carry out every CRD of the plan: a denial refuses the whole
// cluster (why names the rules to add). An error is a review that could not
// be made.
func (o *PrepareOptions) mayPrepare(ctx context.Context, d *driver.Driver, c *scan.Cluster, plan prepare.Plan) (string, error) {
	var denied []string
	for _, p := range plan.CRDs {
		if p.Verdict == prepare.Refuse {
			continue
		}
		i := slices.IndexFunc(c.CRDs, func(crd apiextensionsv1.CustomResourceDefinition) bool { return crd.Name == p.CRD })
		err := d.CheckAccess(ctx, o.policy(ctx, d, p), &c.CRDs[i], p.StorageVersion)
		var deny *access.Denied
		switch {
		case errors.As(err, &deny):
			denied = append(denied, p.CRD+": "+deniedAdvice(deny))
		case err != nil:
			return "", fmt.Errorf("check access for %s: %w", p.CRD, err)
		}
	}
	return strings.Join(denied, "; "), nil
}

// deniedAdvice says what is missing and the rule that grants it to the
// identity prepare runs as: the objects' group, as the chart's
// prepare.groups grants it; the CRD's own rights, as the denial names them.
func deniedAdvice(deny *access.Denied) string {
	if !slices.ContainsFunc(deny.Missing, func(m authorizationv1.ResourceAttributes) bool { return m.Group == deny.Resource.Group }) {
		return deny.Error()
	}
	var missing []string
	for _, m := range deny.Missing {
		missing = append(missing, m.Verb+" "+access.Describe(m))
	}
	return fmt.Sprintf("not allowed to %s; grant the rule %s (with the Helm chart: --set prepare.groups={%s}, or "+
		"config/prepare/role.yaml beside it); nothing was changed", strings.Join(missing, ", "), deny.Rule(), deny.Resource.Group)
}

// prepareCRD carries out one CRD's plan through the graduation's driver, as
// `graduator migrate --prune` does: preflight and round-trip proof, the
// migration, the prune; for a rollback (or a storage version not served)
// the driver first serves the version and switches storage to it, the
// proof before the switch. The graduation's state is kept on the CRD (see
// prepareStore) so that a rerun resumes.
func (o *PrepareOptions) prepareCRD(ctx context.Context, d *driver.Driver, crd *PreparedCRD) {
	started := time.Now()
	crd.StartedAt = &started
	defer func() { now := time.Now(); crd.FinishedAt = &now }()
	if crd.ServeFrom == prepare.ServeFromRelease {
		if err := addVersion(ctx, d.Client, crd.CRD, o.scan.release[crd.CRD], crd.StorageVersion); err != nil {
			crd.Outcome, crd.Refused = OutcomeUnfinished, err.Error()
			return
		}
	}
	store := &prepareStore{durable: &driver.CRDStore{Client: d.Client, Reader: d.Reader, Spec: o.policy(ctx, d, crd.CRDPlan).Spec, Name: crd.CRD}}
	policy, err := store.Load(ctx)
	if err != nil || policy == nil {
		crd.Outcome, crd.Refused = OutcomeUnfinished, fmt.Sprintf("read the CRD: %v (deleted meanwhile?)", err)
		return
	}
	out, err := d.Finish(ctx, store, policy, driverWait)
	result := driver.RunResult(policy.Status)
	crd.Listed, crd.Rewritten, crd.Skipped, crd.Failed = result.Listed, result.Rewritten, result.Skipped, result.Failed
	if r := policy.Status.Migration; r != nil {
		crd.APIServers = r.APIServersCheck
	}
	live := &apiextensionsv1.CustomResourceDefinition{}
	if getErr := d.Reader.Get(context.WithoutCancel(ctx), client.ObjectKey{Name: crd.CRD}, live); getErr == nil {
		crd.StoredVersions = live.Status.StoredVersions
	}
	crd.Pruned = slices.Equal(crd.StoredVersions, []string{crd.StorageVersion})
	switch {
	case err != nil:
		crd.Outcome, crd.Refused = OutcomeUnfinished, err.Error()
		if ctx.Err() != nil {
			crd.Refused = "interrupted; the same command resumes it"
		}
	case out.Failure() != nil:
		crd.Outcome, crd.Refused = OutcomeRefused, out.Failure().Error()
	case result.Failed > 0:
		crd.Outcome, crd.Refused = OutcomeRefused, fmt.Sprintf("%d objects could not be rewritten (%s); storedVersions not pruned",
			result.Failed, firstFailure(result.Failures))
	case !crd.Pruned:
		crd.Outcome, crd.Refused = OutcomeUnfinished, fmt.Sprintf("stopped in phase %s: %s", out.Step.Phase, out.Step.Message())
	default:
		crd.Outcome = OutcomeReady
	}
}

func firstFailure(fs []migration.Failure) string {
	if len(fs) == 0 {
		return "none listed"
	}
	return "first: " + fs[0].String()
}

// policy is the graduation prepare runs on a CRD: the engine flags' (GitOps
// mode: the CRD's own storage version is the target), or managed mode with
// the plan's storage version when prepare serves it or rolls back to it
// (the switch is then prepare's own).
func (o *PrepareOptions) policy(ctx context.Context, d *driver.Driver, p prepare.CRDPlan) *graduatorv1alpha1.CRDVersionPolicy {
	policy, _ := o.engineFlags.policy(ctx, d.Dynamic, p.CRD, migration.WriteToObject)
	if p.Verdict == prepare.Rollback || p.ServeFrom != "" {
		policy.Spec.StorageVersion = p.StorageVersion
	}
	return policy
}

// prepareNeeds are the rights prepare needs on a CRD beyond migrating its
// objects: patch the CRD (the annotation that keeps the graduation's
// state) and its status (the prune).
func prepareNeeds(crd *apiextensionsv1.CustomResourceDefinition) []authorizationv1.ResourceAttributes {
	return []authorizationv1.ResourceAttributes{
		{Verb: "get", Group: apiextensionsv1.GroupName, Resource: "customresourcedefinitions", Name: crd.Name},
		{Verb: "patch", Group: apiextensionsv1.GroupName, Resource: "customresourcedefinitions", Name: crd.Name},
		{Verb: "patch", Group: apiextensionsv1.GroupName, Resource: "customresourcedefinitions", Subresource: "status", Name: crd.Name},
	}
}

// driver is the graduation's driver for one cluster, with clients of its
// own, taking the steps `graduator migrate --prune` takes.
func (o *PrepareOptions) driver(cfg *rest.Config, view *clusterView) (*driver.Driver, error) {
	clients, err := driver.ClientsFor(cfg, nil, nil)
	if err != nil {
		return nil, err
	}
	// Serve and SwitchStorage are planned only in managed mode, which
	// prepare takes for a rollback or a storage version not served.
	allowed := []graduation.Action{graduation.ActionServe, graduation.ActionPreflight, graduation.ActionSwitchStorage,
		graduation.ActionMigrate, graduation.ActionPrune}
	return &driver.Driver{
		Clients:          clients,
		Reporter:         view,
		Allows:           func(a graduation.Action) bool { return slices.Contains(allowed, a) },
		Needs:            prepareNeeds,
		EtcdQuotaSetting: "--etcd-quota",
		AcceptLoss:       graduation.AcceptLossFlag,
		Engine:           o.engineOptions(view),
	}, nil
}

// engineOptions are the flags' tuning at background priority, reporting
// to the cluster's view.
func (o *PrepareOptions) engineOptions(view *clusterView) *migration.Options {
	opts := o.engine
	opts.Priority = migration.PriorityBackground
	opts.OnProgress, opts.OnObject = view.progress, view.object
	return &opts
}

// prepareStore keeps a CRD's graduation on the CRD (driver.CRDStore) from
// the migration's first page on, and in memory before it: a plan refused
// by the preflight or the proof writes nothing to the cluster, and a rerun
// resumes a migration from its last saved page.
type prepareStore struct {
	durable *driver.CRDStore
	held    *graduatorv1alpha1.CRDVersionPolicyStatus
}

// Load reads the graduation on the CRD; what was held in memory stands in
// for it until a migration run is saved there.
func (s *prepareStore) Load(ctx context.Context) (*graduatorv1alpha1.CRDVersionPolicy, error) {
	policy, err := s.durable.Load(ctx)
	if err != nil || policy == nil {
		return policy, err
	}
	if s.held != nil && policy.Status.Migration == nil {
		s.held.DeepCopyInto(&policy.Status)
	}
	return policy, nil
}

// Save holds the status in memory until it has a migration run, then
// writes it on the CRD.
func (s *prepareStore) Save(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy) error {
	if policy.Status.Migration == nil {
		s.held = policy.Status.DeepCopy()
		return nil
	}
	return s.durable.Save(ctx, policy)
}

// addVersion adds version to the CRD named name as the release defines it,
// served and not the storage version: a rollback whose version the
// cluster's CRD no longer lists. spec.versions is an atomic list, written
// whole under an optimistic lock.
func addVersion(ctx context.Context, c client.Client, name string, release *apiextensionsv1.CustomResourceDefinition, version string) error {
	i := slices.IndexFunc(release.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == version })
	if i < 0 {
		return fmt.Errorf("add %s to %s: the release does not define it", version, name)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, live); err != nil {
			return err
		}
		if slices.ContainsFunc(live.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == version }) {
			return nil // added by an earlier run: the driver serves it
		}
		updated := live.DeepCopy()
		added := *release.Spec.Versions[i].DeepCopy()
		added.Served, added.Storage = true, false
		updated.Spec.Versions = append(updated.Spec.Versions, added)
		return c.Patch(ctx, updated, client.MergeFromWithOptions(live, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		return fmt.Errorf("add %s to %s as the release defines it: %w", version, name, err)
	}
	return nil
}
