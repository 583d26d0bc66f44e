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
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/driver"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/migration"
	"github.com/graduator/graduator/snapshot"
)

// migrateSummary is what `graduator migrate -o json` prints.
type migrateSummary struct {
	CRD            string `json:"crd"`
	StorageVersion string `json:"storageVersion"`
	Complete       bool   `json:"complete"`
	Listed         int64  `json:"listed"`
	Rewritten      int64  `json:"rewritten"`
	Skipped        int64  `json:"skipped"`
	Failed         int64  `json:"failed"`
	CaughtUp       int64  `json:"caughtUp"`
	// NothingToMigrate is set when storedVersions held only the storage
	// version and --force was not given: nothing was read or written.
	NothingToMigrate bool `json:"nothingToMigrate,omitempty"`
	// Sweep is how the catch-up sweep found the objects others wrote:
	// "watch" or "list"; SweepReason says why.
	Sweep          migration.SweepMode `json:"sweep,omitempty"`
	SweepReason    string              `json:"sweepReason,omitempty"`
	Failures       []migration.Failure `json:"failures,omitempty"`
	Pruned         bool                `json:"pruned"`
	StoredVersions []string            `json:"storedVersions"`
	// SpaceBudget is the run's etcd space budget and how it was set.
	SpaceBudget string `json:"spaceBudget,omitempty"`
	// APIServers says how the API servers were checked before the run's
	// first write: every one found serving the storage version, or why they
	// could not be asked one by one.
	APIServers string `json:"apiServers,omitempty"`
	// Verified is the comparison of --verify, when asked for.
	Verified *verifyResult `json:"verified,omitempty"`
	// Steps is how long each step took, in the order they ran.
	Steps []stepTime `json:"steps,omitempty"`
}

// MigrateOptions is `graduator migrate` in kubectl's plugin shape.
type MigrateOptions struct {
	flags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams
	engineFlags

	prune  bool
	force  bool
	output string
	quiet  bool
	verify bool
	// writeTo is --write-to: Object or Status.
	writeTo string
	// priority is --priority: background or full.
	priority string

	crdName string
	client  client.Client
	dyn     dynamic.Interface
	crd     apiextensionsv1.CustomResourceDefinition
}

// NewMigrateOptions returns the options of `graduator migrate` with their
// defaults, reading the kubeconfig through flags.
func NewMigrateOptions(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *MigrateOptions {
	return &MigrateOptions{flags: flags, IOStreams: streams, engineFlags: newEngineFlags(),
		writeTo: string(migration.WriteToObject), priority: "background"}
}

// NewCmdMigrate is `graduator migrate CRD`.
func NewCmdMigrate(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	return newCmdMigrate(NewMigrateOptions(flags, streams))
}

// newCmdMigrate is `graduator migrate CRD` on options o, bound to its flags.
func newCmdMigrate(o *MigrateOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate CRD",
		Short: "Rewrite the objects of a CRD in its storage version, then optionally prune storedVersions",
		Long: `Rewrites every object of the CRD (named <plural>.<group>) through the API server, so that
etcd holds it in the CRD's current storage version. With --prune, and only when every
object was rewritten, status.storedVersions is then set to the storage version, after
which old versions can be removed from the CRD. Before the first write, and again before the
prune, every API server (the kubernetes EndpointSlice's addresses) is asked whether it serves
the storage version; the run waits until every one does. The summary says when they could not
be asked one by one (a managed control plane behind one address).

When status.storedVersions already lists only the storage version, every object is stored
in it: the command says "nothing to migrate", writes nothing and exits 0. --force rewrites
every object anyway (after rotating the key of encryption at rest, for example). Either way
the caller's rights are checked first, and a missing one exits 1 naming the rule to add.

On a terminal a progress bar shows the objects done as they are written, the total (from
the API server's remainingItemCount), percent, rate (over the last 10 s), ETA, writers in
flight and failures. Otherwise a line is printed on stderr for each page of progress, one
when the catch-up sweep of objects written during the run starts and one when it ends (a
JSON object a page with -o json). --quiet prints only the summary.

With --verify, every object is read at each served version before the run and compared
after it (see graduator verify); storedVersions is not pruned when an object differs.

Exits 0 when every object was rewritten, 2 when some could not be (they are listed),
1 on any other error or when --verify found differences.`,
		Example: `  graduator migrate pizzas.restaurant.example.com --prune
  graduator migrate pizzas.restaurant.example.com --verify --prune
  kubectl graduator migrate pizzas.restaurant.example.com --qps 50 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return usageError(err)
			}
			return o.Run(cmd.Context())
		},
	}
	o.addFlags(cmd.Flags(), "")
	cmd.Flags().BoolVar(&o.force, "force", false,
		"Rewrite every object even when status.storedVersions lists only the storage version (re-encryption at rest after a key rotation).")
	cmd.Flags().BoolVar(&o.prune, "prune", false, "Prune status.storedVersions to the storage version after a complete run without failures.")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: json prints the final counts (and a JSON object a page on stderr).")
	cmd.Flags().BoolVarP(&o.quiet, "quiet", "q", false, "Print nothing until the summary.")
	cmd.Flags().StringVar(&o.writeTo, "write-to", o.writeTo,
		"Where the no-op writes go: Object, or Status (the /status subresource) for CRDs whose admission webhooks reject no-op writes to the object.")
	cmd.Flags().StringVar(&o.priority, "priority", o.priority,
		"background keeps other clients' write rate at 55% or more of their rate without the migration (measured by "+
			"pausing it briefly now and then) and its own write latency within 1.7x of one write alone, and takes the server's full speed when they barely write; full takes the "+
			"server's full speed up to --concurrency, for maintenance windows, at other clients' expense.")
	cmd.Flags().BoolVar(&o.verify, "verify", false, "Snapshot every object before the run and compare after it; do not prune when one differs.")
	return cmd
}

// Validate refuses bad flags before anything is read.
func (o *MigrateOptions) Validate() error {
	switch {
	case o.output != "" && o.output != "json":
		return fmt.Errorf("unknown output format %q: use json or leave it out", o.output)
	case o.writeTo != string(migration.WriteToObject) && o.writeTo != string(migration.WriteToStatus):
		return fmt.Errorf("--write-to must be %s or %s, got %q", migration.WriteToObject, migration.WriteToStatus, o.writeTo)
	case !strings.EqualFold(o.priority, string(migration.PriorityBackground)) && !strings.EqualFold(o.priority, string(migration.PriorityFull)):
		return fmt.Errorf("--priority must be background or full, got %q", o.priority)
	}
	return o.validate()
}

// checkWriteTarget refuses writes to /status of a version without a status
// subresource: every one would answer 404 and no object would be rewritten.
func checkWriteTarget(crd *apiextensionsv1.CustomResourceDefinition, version string, writeTo migration.WriteTarget) error {
	if graduation.StatusSubresourceMissing(crd, version, writeTo) {
		return fmt.Errorf("--write-to Status, but version %s of %s has no status subresource, so no object could be "+
			"rewritten; use --write-to Object or enable subresources.status on %s; nothing was written", version, crd.Name, version)
	}
	return nil
}

// Complete takes the CRD's name and builds the clients; nothing is read yet.
func (o *MigrateOptions) Complete(args []string) error {
	o.crdName = args[0]
	cfg, err := restConfig(o.flags)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return err
	}
	if o.client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if o.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	o.engine.Config = cfg
	o.engine.WriteTo = migration.WriteTarget(o.writeTo)
	o.engine.Priority = migration.PriorityBackground
	if strings.EqualFold(o.priority, string(migration.PriorityFull)) {
		o.engine.Priority = migration.PriorityFull
	}
	return nil
}

// Run reads the CRD, migrates, prunes when asked and allowed, and prints
// the summary. The graduation is the operator's (package driver), in GitOps
// mode (the CRD's own storage version is the target) and kept in memory:
// the preflight and the migration, then the prune only with --prune and
// after a clean --verify.
func (o *MigrateOptions) Run(ctx context.Context) error {
	if err := o.client.Get(ctx, client.ObjectKey{Name: o.crdName}, &o.crd); err != nil {
		return fmt.Errorf("get CustomResourceDefinition %s: %w", o.crdName, err)
	}
	storage := graduation.StorageVersion(&o.crd)
	if err := checkWriteTarget(&o.crd, storage, o.engine.WriteTo); err != nil {
		return fmt.Errorf("migrate %s: %w", o.crdName, err)
	}
	if len(graduation.StaleStoredVersions(&o.crd)) == 0 && !o.force {
		return o.nothingToMigrate(ctx, storage)
	}
	var before []versionSnapshot
	if o.verify {
		var err error
		before, err = o.snapshotBefore(ctx)
		defer removeSnapshots(before)
		if err != nil {
			return err
		}
	}
	g, err := o.migrate(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", o.crdName, err)
	}
	summary := g.summary(o.crdName, storage, o.crd.Status.StoredVersions)
	if o.verify {
		if summary.Verified, err = o.verifyAfter(ctx, before); err != nil {
			return err
		}
	}
	var pruneErr error
	if o.prune && g.result.Complete && g.result.Failed == 0 && !summary.Verified.differ() {
		if pruneErr = o.pruneAfter(ctx, g, storage); pruneErr == nil {
			summary.Pruned, summary.StoredVersions = true, []string{storage}
		}
		summary.APIServers = g.serversChecked()
	}
	summary.Steps = g.clock.times()
	if err := o.print(summary); err != nil {
		return err
	}
	switch {
	case g.result.Failed > 0:
		return &exitError{code: ExitBadInput, err: fmt.Errorf("%d objects of %s could not be rewritten", g.result.Failed, o.crdName)}
	case pruneErr != nil:
		return pruneErr
	case summary.Verified.differ():
		return fmt.Errorf("%d objects of %s differ from their snapshot before the run", summary.Verified.Differences, o.crdName)
	}
	return nil
}

// graduationRun is one `graduator migrate`: its graduation kept in memory,
// the progress it draws and the times of its steps.
type graduationRun struct {
	store    *driver.MemoryStore
	policy   *graduatorv1alpha1.CRDVersionPolicy
	progress *progressReporter
	clock    *stepClock
	result   migration.Result
}

// migrate runs the preflight and the migration.
func (o *MigrateOptions) migrate(ctx context.Context) (*graduationRun, error) {
	progress := newProgressReporter(o.ErrOut, o.crdName, pickProgressMode(o.ErrOut, o.quiet, o.output == "json"))
	g := &graduationRun{progress: progress, clock: newStepClock(progress.start)}
	g.clock.progress = progress
	var quotaFrom string
	g.policy, quotaFrom = o.policy(ctx, o.dyn, o.crdName, o.engine.WriteTo)
	if quotaFrom != "" && !o.quiet {
		_, _ = fmt.Fprintln(o.ErrOut, quotaFrom)
	}
	g.store = &driver.MemoryStore{Policy: g.policy.DeepCopy()}
	d, err := o.driver(progress, g.clock, graduation.ActionPreflight, graduation.ActionMigrate)
	if err != nil {
		return nil, err
	}
	out, err := d.Finish(ctx, g.store, g.policy, driverWait)
	g.result = driver.RunResult(g.policy.Status)
	progress.done(g.result)
	if err == nil && (out.Stall != nil || g.result.Failed == 0) {
		err = out.Failure() // objects that failed have their own exit
	}
	return g, err
}

// pruneAfter prunes storedVersions after a clean run, once the plan finds
// every API server serving the storage version again.
func (o *MigrateOptions) pruneAfter(ctx context.Context, g *graduationRun, storage string) error {
	d, err := o.driver(g.progress, g.clock, graduation.ActionPrune)
	if err != nil {
		return err
	}
	out, err := d.Finish(ctx, g.store, g.policy, driverWait)
	if err == nil && out.Failure() != nil {
		err = fmt.Errorf("prune %s: %w", o.crdName, out.Failure())
	}
	if err != nil {
		return err
	}
	return o.checkPruned(ctx, storage, out)
}

// summary is what the run did, as `graduator migrate` prints it.
func (g *graduationRun) summary(crd, storage string, stored []string) migrateSummary {
	r := g.result
	return migrateSummary{
		CRD: crd, StorageVersion: storage, Complete: r.Complete,
		Listed: r.Listed, Rewritten: r.Rewritten, Skipped: r.Skipped, Failed: r.Failed,
		CaughtUp: r.CaughtUp, Sweep: r.SweepMode, SweepReason: r.SweepReason,
		Failures: r.Failures, StoredVersions: stored, SpaceBudget: r.SpaceBudgetReason,
		APIServers: g.serversChecked(),
	}
}

// serversChecked is how the API servers were last checked: before the
// first write, then before the prune.
func (g *graduationRun) serversChecked() string {
	if r := g.policy.Status.Migration; r != nil {
		return r.APIServersCheck
	}
	return ""
}

func (o *MigrateOptions) print(summary migrateSummary) error {
	if o.output == "json" {
		return printJSON(o.Out, summary, &printers.JSONPrinter{})
	}
	printSummary(o.Out, summary)
	return nil
}

// nothingToMigrate answers a run on a CRD whose storedVersions lists only
// its storage version: every object is stored in it, so nothing is read or
// written. The caller's rights are still checked, so that a user who lacks
// them learns it now rather than from the run that needs them.
func (o *MigrateOptions) nothingToMigrate(ctx context.Context, storage string) error {
	d, err := o.driver(nil, newStepClock(time.Now()))
	if err != nil {
		return err
	}
	policy, _ := o.policy(ctx, o.dyn, o.crdName, o.engine.WriteTo)
	if err := d.CheckAccess(ctx, policy, &o.crd, storage); err != nil {
		return fmt.Errorf("migrate %s: %w", o.crdName, err)
	}
	summary := migrateSummary{CRD: o.crdName, StorageVersion: storage, Complete: true, NothingToMigrate: true,
		StoredVersions: o.crd.Status.StoredVersions}
	return o.print(summary)
}

// checkPruned makes sure the prune happened: the plan holds it while an
// API server is behind, and plans the run again when one joined during it,
// which this door does not take.
func (o *MigrateOptions) checkPruned(ctx context.Context, storage string, out driver.Outcome) error {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := o.client.Get(ctx, client.ObjectKey{Name: o.crdName}, &crd); err != nil {
		return fmt.Errorf("prune %s: %w", o.crdName, err)
	}
	if !slices.Equal(crd.Status.StoredVersions, []string{storage}) {
		return fmt.Errorf("prune %s: status.storedVersions is still [%s]: %s", o.crdName,
			strings.Join(crd.Status.StoredVersions, ", "), out.Step.Message())
	}
	return nil
}

// driverWait bounds how long `graduator migrate` waits for the storage
// switch to show in discovery.
const driverWait = 2 * time.Minute

// driver is the graduation's driver for the actions given, drawing the
// progress bar.
func (o *MigrateOptions) driver(progress *progressReporter, reporter driver.Reporter, actions ...graduation.Action) (*driver.Driver, error) {
	clients, err := driver.ClientsFor(o.engine.Config, o.client, o.client)
	if err != nil {
		return nil, err
	}
	return &driver.Driver{
		Clients:          clients,
		Reporter:         reporter,
		Allows:           func(a graduation.Action) bool { return slices.Contains(actions, a) },
		RewriteAll:       o.force,
		EtcdQuotaSetting: "--etcd-quota",
		AcceptLoss:       graduation.AcceptLossFlag,
		Engine:           o.engineOptions(progress),
	}, nil
}

// engineOptions are the flags' tuning as the engine takes it, drawing the
// progress bar when there is one.
func (o *MigrateOptions) engineOptions(progress *progressReporter) *migration.Options {
	opts := o.engine
	if progress != nil {
		opts.OnProgress, opts.OnObject = progress.update, progress.object
	}
	return &opts
}

func printSummary(w io.Writer, s migrateSummary) {
	if s.NothingToMigrate {
		_, _ = fmt.Fprintf(w, "%s: nothing to migrate: every object is stored as %s (status.storedVersions is [%s]); "+
			"--force rewrites every object anyway\n", s.CRD, s.StorageVersion, strings.Join(s.StoredVersions, ", "))
		return
	}
	lines := []string{fmt.Sprintf("%s: %d listed, %d rewritten as %s, %d skipped, %d failed; %d written during the run caught up",
		s.CRD, s.Listed, s.Rewritten, s.StorageVersion, s.Skipped, s.Failed, s.CaughtUp)}
	if s.APIServers != "" {
		lines = append(lines, "  API servers: "+s.APIServers)
	}
	if s.Sweep == migration.SweepList {
		// The exception worth a look: the sweep read every object again.
		lines = append(lines, "  the catch-up sweep listed every object again: "+s.SweepReason)
	}
	for _, f := range s.Failures {
		lines = append(lines, "  failed: "+f.String())
	}
	if v := s.Verified; v != nil {
		lines = append(lines, v.String())
	}
	if s.Pruned {
		lines = append(lines, fmt.Sprintf("status.storedVersions pruned to [%s]%s", s.StorageVersion, restsOnClock(s.APIServers)))
	} else {
		lines = append(lines, fmt.Sprintf("status.storedVersions: [%s]", strings.Join(s.StoredVersions, ", ")))
	}
	_, _ = fmt.Fprintln(w, strings.Join(lines, "\n"))
}

// restsOnClock is what the prune's line adds when the API servers were not
// checked before it: the prune's safety rests on the settle delay, and the
// check's verdict (which says the right that would let it check) is that
// sentence's first clause.
func restsOnClock(check string) string {
	if !strings.HasPrefix(check, "not checked") {
		return ""
	}
	verdict, _, _ := strings.Cut(check, ": ")
	return "; its safety rests on the clock: the API servers were " + verdict
}

// snapshotBefore snapshots every object at each served version, into
// temporary files (compressed, streamed: not held in memory). Reading at
// the old versions too is what catches a conversion that loses a field on
// the way back.
func (o *MigrateOptions) snapshotBefore(ctx context.Context) ([]versionSnapshot, error) {
	dir, err := os.MkdirTemp("", "graduator-verify-")
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	var snaps []versionSnapshot
	for _, version := range servedVersions(&o.crd) {
		path := filepath.Join(dir, version+".json.gz")
		snaps = append(snaps, versionSnapshot{version: version, path: path})
		n, err := writeSnapshot(ctx, o.dyn, graduation.ResourceAt(&o.crd, version), path)
		if err != nil {
			return snaps, fmt.Errorf("verify: %w", err)
		}
		if !o.quiet && o.output != "json" {
			_, _ = fmt.Fprintf(o.ErrOut, "snapshot: %d objects of %s read at %s\n", n, o.crdName, version)
		}
	}
	return snaps, nil
}

// verifyAfter compares every object with its snapshots, printing each
// difference (text output) as it is found.
func (o *MigrateOptions) verifyAfter(ctx context.Context, snaps []versionSnapshot) (*verifyResult, error) {
	res := &verifyResult{}
	for _, s := range snaps {
		res.Versions = append(res.Versions, s.version)
		p := newDifferencePrinter(o.Out, false)
		p.prefix = "at " + s.version + ": "
		if o.output == "json" {
			p = &differencePrinter{collect: func(d snapshot.Difference) {
				if len(res.First) < maxDifferencesKept {
					res.First = append(res.First, versionDifference{Version: s.version, Difference: d})
				}
			}}
		}
		sum, err := compareSnapshot(ctx, o.dyn, s.path, p)
		if err != nil {
			return nil, fmt.Errorf("verify %s at %s: %w", o.crdName, s.version, err)
		}
		res.Identical = max(res.Identical, sum.Identical)
		res.Differences += sum.Differences()
	}
	return res, nil
}
