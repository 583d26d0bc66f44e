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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/internal/storagemigration"
)

// CRDStatus is one row of `graduator status`: the versions of a CRD and, when
// a CRDVersionPolicy governs it, where its graduation is.
type CRDStatus struct {
	Name           string   `json:"name"`
	StorageVersion string   `json:"storageVersion"`
	StoredVersions []string `json:"storedVersions"`
	Served         []string `json:"served"`
	Deprecated     []string `json:"deprecated,omitempty"`
	// Drift lists stored versions that are no longer the storage version:
	// objects may still be encoded in them.
	Drift []string `json:"drift,omitempty"`
	// Policy is the policy that governs the CRD: its own, or the selector
	// policy that generated it.
	Policy      string `json:"policy,omitempty"`
	PolicyPhase string `json:"policyPhase,omitempty"`
	Ready       string `json:"ready,omitempty"`
	// Reason is the Ready condition's reason: why a graduation waits or
	// stalls (ConversionFailed, Forbidden, ...).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// PolicyError says why the policy could not be read, when it could not.
	PolicyError string `json:"policyError,omitempty"`
	// Progress is the running migration's "done/listed", with the
	// percent done when the total is known.
	Progress string `json:"progress,omitempty"`
	// Writers is the migration's adaptive limit on writes in flight.
	Writers int32 `json:"writers,omitempty"`
	// ETA is the time the migration needs at its rate so far, when the total
	// is known.
	ETA string `json:"eta,omitempty"`
	// InTree are Kubernetes' in-tree StorageVersionMigrations of the CRD's
	// resource (1.37+), oldest first: Graduator's (engine
	// StorageVersionMigration) and any made by hand.
	InTree []InTreeMigration `json:"inTreeMigrations,omitempty"`
}

// InTreeMigration is one StorageVersionMigration of a CRD's resource.
type InTreeMigration struct {
	Name string `json:"name"`
	// Phase is Running, Succeeded or Failed.
	Phase string `json:"phase"`
}

// StatusOptions is `graduator status` in kubectl's plugin shape.
type StatusOptions struct {
	flags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams
	output   string
	watch    bool
	clusters clusterFlags
	// targets are the clusters read when clusters.many().
	targets []cluster

	crdName   string
	crdClient apiextensionsclient.Interface
	dyn       dynamic.Interface
	kube      kubernetes.Interface
	md        metadata.Interface // for --watch

	// crds is what --watch keeps of the CRDs between redraws (no schemas),
	// listed again only when a CRD changed (crdsStale): a migration
	// redraws the table every page, and the CRDs of a cluster can weigh
	// hundreds of MiB.
	crds      []apiextensionsv1.CustomResourceDefinition
	crdsStale bool
}

// NewStatusOptions returns the options of `graduator status`, reading the
// kubeconfig through flags.
func NewStatusOptions(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *StatusOptions {
	return &StatusOptions{flags: flags, IOStreams: streams, output: "table"}
}

// NewCmdStatus is `graduator status [CRD]`.
func NewCmdStatus(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewStatusOptions(flags, streams)
	cmd := &cobra.Command{
		Use:   "status [CRD]",
		Short: "Show the storage and served versions of every CRD, drift, and each policy's phase",
		Long: `Lists every CustomResourceDefinition with its storage version, its stored versions
(status.storedVersions), its served and deprecated versions, drift (a stored version
that is no longer the storage version, so objects may still be encoded in it), and the
phase and Ready reason of the CRDVersionPolicy that governs it, if any.

With a CRD's name, shows that CRD in detail: its policy's conditions with their reasons and
messages, the migration's counts and first failures, and the policy's latest Events: what
to read when a graduation is blocked.

The table fits 120 columns: -o wide adds the stored, served and deprecated versions, the
policy's name and the migration's writers.

With --watch (-w), redraws whenever a CRD or a policy changes, until Ctrl-C.

Many clusters: --context a,b (or --context repeated) or --all-contexts reads the contexts
of the kubeconfig (--kubeconfig, or the files KUBECONFIG lists) in parallel (--parallel),
each within --request-timeout (30s when not set). The table gets a CONTEXT column and a
summary line per cluster; -o json|yaml is keyed by context. A cluster that could not be
read is a row with the reason, and the command then exits 1.`,
		Example: `  graduator status --all-contexts
  graduator status --context prod-eu,prod-us --request-timeout 10s -o yaml
  graduator status
  graduator status -w
  graduator status -o wide
  graduator status pizzas.restaurant.example.com -w
  graduator status -o yaml`,
		Args: cobra.MaximumNArgs(1),
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
	cmd.Flags().StringVarP(&o.output, "output", "o", o.output, "Output format: table, wide (more columns), json or yaml.")
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "After printing, redraw whenever a CRD or a policy changes, until Ctrl-C.")
	o.clusters.addFlags(cmd.Flags())
	return cmd
}

// Validate refuses an unknown output format before anything is read.
func (o *StatusOptions) Validate() error {
	switch {
	case o.output != "table" && o.output != "wide" && o.output != "json" && o.output != "yaml":
		return fmt.Errorf("unknown output format %q: use table, wide, json or yaml", o.output)
	case o.watch && o.output != "table" && o.output != "wide":
		return fmt.Errorf("--watch redraws the table; -o %s prints the same data once", o.output)
	case o.clusters.many() && o.watch:
		return errors.New("--watch redraws one cluster: give one --context")
	case o.clusters.many() && o.crdName != "":
		return fmt.Errorf("the detail of %s reads one cluster: give one --context", o.crdName)
	}
	return nil
}

// Complete takes the CRD's name, if any, and builds the clients.
func (o *StatusOptions) Complete(args []string) error {
	if len(args) == 1 {
		o.crdName = args[0]
	}
	if err := o.clusters.validate(); err != nil {
		return usageError(err)
	}
	clusters, err := o.clusters.clusters(o.flags)
	if err != nil {
		return usageError(err)
	}
	if o.clusters.many() {
		o.targets = clusters
		return nil
	}
	cfg := clusters[0].Config
	if o.crdClient, err = apiextensionsclient.NewForConfig(cfg); err != nil {
		return err
	}
	if o.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	if o.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if o.watch {
		o.md, err = metadata.NewForConfig(cfg)
	}
	return err
}

// Run reads the CRDs and policies and prints them, once or, with --watch,
// at every change.
func (o *StatusOptions) Run(ctx context.Context) error {
	if o.watch {
		return o.watchAndRedraw(ctx)
	}
	if o.clusters.many() {
		return o.printClusters(ctx)
	}
	return o.print(ctx, o.Out)
}

// print reads the CRDs and policies and prints them to w.
func (o *StatusOptions) print(ctx context.Context, w io.Writer) error {
	if o.crdName != "" {
		return o.describeCRD(ctx, w, o.crdName)
	}
	if o.crds == nil || o.crdsStale || !o.watch {
		crds, err := listCRDs(ctx, o.crdClient, false)
		if err != nil {
			return err
		}
		o.crds, o.crdsStale = crds, false
	}
	rows, err := collectStatus(ctx, o.crds, o.dyn, time.Now())
	if err != nil {
		return err
	}
	switch o.output {
	case "json":
		return printJSON(w, rows, &printers.JSONPrinter{})
	case "yaml":
		return printJSON(w, rows, &printers.YAMLPrinter{})
	}
	return printStatusTable(w, rows, o.output == "wide")
}

// printJSON prints v through one of cli-runtime's printers (JSON or
// YAML): they take runtime objects, and our rows and summaries are not
// one, so they go as raw JSON.
func printJSON(w io.Writer, v any, p printers.ResourcePrinter) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return p.PrintObj(&runtime.Unknown{Raw: data, ContentType: runtime.ContentTypeJSON}, w)
}

// collectStatus reads every CRD and every policy. Policies are optional: a
// cluster without the operator installed still gets the CRD columns.
func collectStatus(ctx context.Context, crds []apiextensionsv1.CustomResourceDefinition, dyn dynamic.Interface, now time.Time) ([]CRDStatus, error) {
	policies := map[string]*graduatorv1alpha1.CRDVersionPolicy{}
	undecodable := map[string]error{}
	list, err := dyn.Resource(graduatorv1alpha1.GroupVersion.WithResource("crdversionpolicies")).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, item := range list.Items {
			var p graduatorv1alpha1.CRDVersionPolicy
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &p); err != nil {
				// A policy written by a newer operator, or by hand: show it
				// with the error rather than hide it.
				undecodable[item.GetName()] = err
				continue
			}
			policies[p.Name] = &p
		}
	} else if !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("list CRDVersionPolicies: %w", err)
	}
	rows := statusRows(crds, policies, undecodable)
	svms, err := listInTreeMigrations(ctx, dyn)
	if err != nil {
		return nil, err
	}
	addInTree(rows, crds, svms)
	for i := range rows {
		addETA(ctx, dyn, &rows[i], crds, policies[rows[i].Name], now)
	}
	return rows, nil
}

// listInTreeMigrations lists the in-tree StorageVersionMigrations. They are
// optional too: a cluster before 1.37 has none, and a user may not be
// allowed to read them.
func listInTreeMigrations(ctx context.Context, dyn dynamic.Interface) ([]svmv1.StorageVersionMigration, error) {
	list, err := dyn.Resource(svmv1.SchemeGroupVersion.WithResource("storageversionmigrations")).List(ctx, metav1.ListOptions{})
	switch {
	case meta.IsNoMatchError(err), apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("list StorageVersionMigrations: %w", err)
	}
	svms := make([]svmv1.StorageVersionMigration, 0, len(list.Items))
	for _, item := range list.Items {
		var svm svmv1.StorageVersionMigration
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &svm); err != nil {
			return nil, fmt.Errorf("decode StorageVersionMigration %s: %w", item.GetName(), err)
		}
		svms = append(svms, svm)
	}
	slices.SortStableFunc(svms, func(a, b svmv1.StorageVersionMigration) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	return svms, nil
}

// addInTree gives each CRD's row the in-tree migrations of its resource.
func addInTree(rows []CRDStatus, crds []apiextensionsv1.CustomResourceDefinition, svms []svmv1.StorageVersionMigration) {
	byName := map[string]*CRDStatus{}
	for i := range rows {
		byName[rows[i].Name] = &rows[i]
	}
	for i := range crds {
		row := byName[crds[i].Name]
		if row == nil {
			continue
		}
		resource := storagemigration.ResourceOf(&crds[i])
		for j := range svms {
			if svms[j].Spec.Resource == resource {
				row.InTree = append(row.InTree, InTreeMigration{Name: svms[j].Name, Phase: string(storagemigration.PhaseOf(&svms[j]))})
			}
		}
	}
}

// inTreeColumns are the in-tree migrations of a row: their phases for the
// default table (names are long), name:phase for -o wide.
func inTreeColumns(migrations []InTreeMigration) (phases, named string) {
	if len(migrations) == 0 {
		return "-", "-"
	}
	p := make([]string, 0, len(migrations))
	n := make([]string, 0, len(migrations))
	for _, m := range migrations {
		p = append(p, m.Phase)
		n = append(n, m.Name+":"+m.Phase)
	}
	return strings.Join(p, ","), strings.Join(n, ",")
}

// addETA counts the objects of a CRD whose migration runs (a LIST of one
// object: the API server's remainingItemCount says how many follow) and
// gives the row its percent and ETA. The policy's status carries the
// counts so far but not the total.
func addETA(ctx context.Context, dyn dynamic.Interface, row *CRDStatus, crds []apiextensionsv1.CustomResourceDefinition,
	p *graduatorv1alpha1.CRDVersionPolicy, now time.Time) {
	if p == nil || p.Status.Phase != graduatorv1alpha1.PhaseMigrating || p.Status.Migration == nil || p.Status.Migration.CatchUp {
		return
	}
	i := slices.IndexFunc(crds, func(c apiextensionsv1.CustomResourceDefinition) bool { return c.Name == row.Name })
	if i < 0 {
		return
	}
	list, err := dyn.Resource(graduation.ResourceAt(&crds[i], row.StorageVersion)).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil || len(list.Items) == 0 {
		return // a courtesy: without it the row shows the counts alone
	}
	total := int64(len(list.Items))
	if n := list.GetRemainingItemCount(); n != nil {
		total += *n
	} else if list.GetContinue() != "" {
		return // the server did not count
	}
	row.Progress, row.ETA = migrationProgress(p.Status.Migration, total, now)
}

// migrationProgress is the policy's "done/listed", with the percent of
// total done and the ETA at the run's rate so far when total is known (>= 0).
func migrationProgress(run *graduatorv1alpha1.MigrationStatus, total int64, now time.Time) (progress, eta string) {
	done := run.Done()
	progress = fmt.Sprintf("%d/%d", done, run.Listed)
	if total < 0 {
		return progress, ""
	}
	total = max(total, done)
	if total > 0 {
		progress += fmt.Sprintf(" (%d%%)", 100*done/total)
	}
	if run.StartedAt == nil || done == 0 {
		return progress, ""
	}
	elapsed := now.Sub(run.StartedAt.Time)
	if elapsed <= 0 {
		return progress, ""
	}
	left := time.Duration(float64(total-done) / float64(done) * float64(elapsed)).Round(time.Second)
	return progress, duration.HumanDuration(left)
}

// statusRows builds the rows, sorted by name: one per CRD, and one per
// policy whose CRD does not exist.
func statusRows(crds []apiextensionsv1.CustomResourceDefinition, policies map[string]*graduatorv1alpha1.CRDVersionPolicy,
	undecodable map[string]error) []CRDStatus {
	rows := make([]CRDStatus, 0, len(crds))
	seen := map[string]bool{}
	for i := range crds {
		crd := &crds[i]
		seen[crd.Name] = true
		row := CRDStatus{
			Name:           crd.Name,
			StorageVersion: graduation.StorageVersion(crd),
			StoredVersions: crd.Status.StoredVersions,
			Drift:          graduation.StaleStoredVersions(crd),
		}
		for _, v := range crd.Spec.Versions {
			if v.Served {
				row.Served = append(row.Served, v.Name)
			}
			if v.Deprecated {
				row.Deprecated = append(row.Deprecated, v.Name)
			}
		}
		addPolicy(&row, policies[crd.Name], undecodable[crd.Name])
		rows = append(rows, row)
	}
	for name, p := range policies {
		if !seen[name] {
			row := CRDStatus{Name: name}
			addPolicy(&row, p, nil)
			rows = append(rows, row)
		}
	}
	for name, err := range undecodable {
		if !seen[name] {
			row := CRDStatus{Name: name}
			addPolicy(&row, nil, err)
			rows = append(rows, row)
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return rows
}

// addPolicy fills the policy's columns of a row.
func addPolicy(row *CRDStatus, p *graduatorv1alpha1.CRDVersionPolicy, decodeErr error) {
	if decodeErr != nil {
		row.PolicyPhase = "Unreadable"
		row.PolicyError = decodeErr.Error()
		return
	}
	if p == nil {
		return
	}
	row.Policy = p.Name
	if fleet := p.Labels[graduatorv1alpha1.FleetLabel]; fleet != "" {
		row.Policy = fleet + " (selector)"
	}
	row.PolicyPhase = phaseOf(p)
	if run := p.Status.Migration; run != nil && p.Status.Phase == graduatorv1alpha1.PhaseMigrating {
		row.Progress, _ = migrationProgress(run, -1, time.Time{})
		row.Writers = run.Writers
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, graduatorv1alpha1.ConditionReady); c != nil {
		row.Ready, row.Reason, row.Message = string(c.Status), c.Reason, c.Message
	}
}

// phaseOf is a policy's phase as the status shows it: Pending before the
// operator wrote one.
func phaseOf(p *graduatorv1alpha1.CRDVersionPolicy) string {
	if p.Status.Phase == "" {
		return "Pending"
	}
	return string(p.Status.Phase)
}

// printStatusTable prints the rows through cli-runtime's table printer, as
// kubectl get does. The default columns fit 120; wide adds the rarer ones
// (priority 1, as kubectl's -o wide).
func printStatusTable(w io.Writer, rows []CRDStatus, wide bool) error {
	table := &metav1.Table{ColumnDefinitions: statusColumns()}
	for _, r := range rows {
		table.Rows = append(table.Rows, metav1.TableRow{Cells: statusCells(r)})
	}
	return printers.NewTablePrinter(printers.PrintOptions{Wide: wide}).PrintObj(table, w)
}

// statusColumns are the status table's columns; Reason is the last.
func statusColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "CRD", Type: "string"}, {Name: "Storage", Type: "string"}, {Name: "Stored", Type: "string", Priority: 1},
		{Name: "Served", Type: "string", Priority: 1}, {Name: "Deprecated", Type: "string", Priority: 1}, {Name: "Drift", Type: "string"},
		{Name: "Policy", Type: "string", Priority: 1}, {Name: "Phase", Type: "string"}, {Name: "Progress", Type: "string"},
		{Name: "Writers", Type: "string", Priority: 1}, {Name: "ETA", Type: "string"}, {Name: "In-tree", Type: "string"},
		{Name: "StorageVersionMigrations", Type: "string", Priority: 1}, {Name: "Reason", Type: "string"},
	}
}

// statusCells are a row's cells, in statusColumns' order.
func statusCells(r CRDStatus) []any {
	writers := "-"
	if r.Writers > 0 {
		writers = fmt.Sprint(r.Writers)
	}
	reason := orDash(r.Reason)
	if r.PolicyError != "" {
		reason = "cannot decode the policy: " + r.PolicyError
	}
	phases, named := inTreeColumns(r.InTree)
	return []any{
		r.Name, orDash(r.StorageVersion), list(r.StoredVersions), list(r.Served), list(r.Deprecated), list(r.Drift), orDash(r.Policy),
		orDash(r.PolicyPhase), orDash(r.Progress), writers, orDash(r.ETA), phases, named, reason,
	}
}

func list(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
