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
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	discoveryv1 "k8s.io/api/discovery/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/check"
	"github.com/graduator/graduator/internal/scan"
	"github.com/graduator/graduator/internal/storagemigration"
)

// ScanOptions is `graduator scan` in kubectl's plugin shape: Complete reads
// the flags, the release (--against) and the kubeconfig, and refuses bad
// input before any cluster is read; Run reads every cluster (GET and LIST
// only) and reports.
type ScanOptions struct {
	flags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams

	clusters    clusterFlags
	output      string
	failOn      string
	against     []string
	checkConfig string

	threshold scan.Severity
	release   map[string]*apiextensionsv1.CustomResourceDefinition
	config    check.Config
	targets   []cluster
}

// NewScanOptions returns the options of `graduator scan`.
func NewScanOptions(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *ScanOptions {
	return &ScanOptions{flags: flags, IOStreams: streams, output: "table", failOn: string(scan.Warning)}
}

// NewCmdScan is `graduator scan`.
func NewCmdScan(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewScanOptions(flags, streams)
	cmd := &cobra.Command{
		Use:   "scan",
		Short: "Find, read-only, what the next upgrade of each cluster's CRDs will trip on",
		Long: `Reads every CRD of every cluster given (GET and LIST only: the scan writes nothing, and
needs nothing installed) and reports what a person must act on, each finding with a
severity, why, and the command or policy that fixes it:

  error    stale-stored-versions             status.storedVersions lists a version besides the
                                             storage version: a release that drops it is refused
  warning  stored-version-not-served         a stored version is no longer served
  error    storage-version-not-served        the storage version is not served: nothing can settle
  warning  deprecated-storage-version        the storage version is deprecated
  warning  deprecated-version-not-retired    a deprecated version is served and the CRD's policy does
                                             not unserve it (info where no policy governs the CRD:
                                             the vendor retires it; read its release notes)
  error    conversion-webhook-no-endpoint    the conversion webhook's Service has no ready endpoint
  info     conversion-webhook-not-checked    the scan may not read Services or EndpointSlices
  error    storage-version-migration-failed  an in-tree StorageVersionMigration failed
  error    policy-stalled                    a CRDVersionPolicy waits for a person
  *        release/RULE                      with --against: graduator check's rules between the
                                             cluster's CRDs and the release's

Clusters: the current context, --context a,b (or repeated), or --all-contexts, from the
kubeconfig (--kubeconfig, or the files KUBECONFIG lists), read in parallel (--parallel),
each within --request-timeout (30s when not set). A cluster that could not be read is a
row with the reason; the others are still shown. -o json|yaml is keyed by context.

Exits 0 when no finding is at or above --fail-on (default warning), 1 when one is, 2 on bad
input (bad flags included) or when a cluster could not be read, as graduator check does.
The default gates on what the cluster's own people can and should act on before the next
upgrade; info (what the scan could not check, a vendor's deprecated version) never fails it.`,
		Example: `  graduator scan --all-contexts
  graduator scan --context prod-eu,prod-us --fail-on error -o json
  helm template my-release chart/ | graduator scan --all-contexts --against -`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(cmd.Context()); err != nil {
				return badInput(err)
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return badInput(err) })
	o.clusters.addFlags(cmd.Flags())
	cmd.Flags().StringVarP(&o.output, "output", "o", o.output, "Output format: table, json or yaml.")
	cmd.Flags().StringVar(&o.failOn, "fail-on", o.failOn, "Exit 1 when a finding is at or above this severity: error, warning or info.")
	cmd.Flags().StringSliceVar(&o.against, "against", nil,
		"The manifests a release is about to apply (a file, a directory, or - for stdin; repeat for more): "+
			"what graduator check finds between each cluster's CRDs and them.")
	cmd.Flags().StringVar(&o.checkConfig, "check-config", "", "With --against: graduator check's --config (rules' enforcement).")
	return cmd
}

// Complete refuses bad input before any cluster is read: flags, the
// release's manifests, the kubeconfig and the contexts.
func (o *ScanOptions) Complete(ctx context.Context) error {
	switch o.output {
	case "table", "json", "yaml":
	default:
		return fmt.Errorf("unknown output format %q: use table, json or yaml", o.output)
	}
	var err error
	if o.threshold, err = scan.ParseSeverity(o.failOn); err != nil {
		return fmt.Errorf("--fail-on: %w", err)
	}
	if err := o.clusters.validate(); err != nil {
		return err
	}
	if err := o.loadRelease(ctx); err != nil {
		return err
	}
	o.targets, err = o.clusters.clusters(o.flags)
	return err
}

// loadRelease reads --against and --check-config.
func (o *ScanOptions) loadRelease(ctx context.Context) error {
	if o.checkConfig != "" {
		if len(o.against) == 0 {
			return errors.New("--check-config applies to --against")
		}
		data, err := os.ReadFile(o.checkConfig)
		if err != nil {
			return err
		}
		if err := yaml.UnmarshalStrict(data, &o.config); err != nil {
			return fmt.Errorf("--check-config %s: %w", o.checkConfig, err)
		}
		if err := o.config.Validate(); err != nil {
			return err
		}
	}
	if len(o.against) == 0 {
		return nil
	}
	o.release = map[string]*apiextensionsv1.CustomResourceDefinition{}
	source := check.Source{Stdin: o.In}
	for _, arg := range o.against {
		if arg == check.Cluster {
			return errors.New("--against takes the release's manifests (a file, a directory or -), not the cluster")
		}
		crds, err := source.Load(ctx, arg)
		if err != nil {
			return fmt.Errorf("--against %s: %w", arg, err)
		}
		for name, crd := range crds {
			if _, dup := o.release[name]; dup {
				return fmt.Errorf("--against: CRD %s is defined twice", name)
			}
			o.release[name] = crd
		}
	}
	if len(o.release) == 0 {
		return fmt.Errorf("--against %s holds no CustomResourceDefinition (documents of other kinds are ignored)",
			strings.Join(o.against, ","))
	}
	return nil
}

// ClusterScan is one cluster of `graduator scan`. The JSON field names are
// a contract.
type ClusterScan struct {
	Error   *ClusterError `json:"error,omitempty"`
	Summary string        `json:"summary"`
	CRDs    int           `json:"crds"`
	// NotChecked lists what the scan could not read, and the permission it
	// needs.
	NotChecked []string       `json:"notChecked,omitempty"`
	Findings   []scan.Finding `json:"findings"`
}

// scanned is what readScan returns of one cluster.
type scanned struct {
	findings   []scan.Finding
	crds       int
	notChecked []string
}

// Run scans every cluster and reports; see the command's exit codes.
func (o *ScanOptions) Run(ctx context.Context) error {
	results, errs := eachCluster(ctx, o.targets, o.clusters.parallel, func(ctx context.Context, cfg *rest.Config) (scanned, error) {
		i := slices.IndexFunc(o.targets, func(t cluster) bool { return t.Config == cfg })
		return o.readScan(ctx, o.targets[i])
	})
	out := map[string]ClusterScan{}
	contexts := make([]string, len(o.targets))
	var failed []string
	var over int
	for i, t := range o.targets {
		contexts[i] = t.Context
		cs := ClusterScan{Error: clusterError(errs[i]), CRDs: results[i].crds, NotChecked: results[i].notChecked,
			Findings: results[i].findings}
		if cs.Findings == nil {
			cs.Findings = []scan.Finding{}
		}
		if cs.Error != nil {
			failed = append(failed, t.Context)
		}
		for _, f := range cs.Findings {
			if f.Severity.AtLeast(o.threshold) {
				over++
			}
		}
		cs.Summary = scanSummary(cs)
		out[t.Context] = cs
	}
	if err := o.print(contexts, out); err != nil {
		return err
	}
	return scanVerdict(len(o.targets), failed, over, o.threshold)
}

// scanVerdict is the scan's exit: 2 when a cluster could not be read (the
// answer is incomplete, whatever the others found), 1 when over findings
// are at or above the threshold, else none (0).
func scanVerdict(clusters int, failed []string, over int, threshold scan.Severity) error {
	switch {
	case len(failed) > 0:
		return &exitError{code: ExitBadInput, err: fmt.Errorf("%d of %d clusters could not be read: %s", len(failed), clusters,
			strings.Join(failed, ", "))}
	case over > 0:
		return &exitError{code: ExitError, err: fmt.Errorf("%d findings at or above %s", over, threshold)}
	}
	return nil
}

func (o *ScanOptions) print(contexts []string, out map[string]ClusterScan) error {
	switch o.output {
	case "json":
		return printJSON(o.Out, out, &printers.JSONPrinter{})
	case "yaml":
		return printJSON(o.Out, out, &printers.YAMLPrinter{})
	}
	return printScanTable(o.Out, contexts, out)
}

// scanSummary is a cluster's line under the table.
func scanSummary(cs ClusterScan) string {
	if cs.Error != nil {
		return fmt.Sprintf("not read (%s): %s", cs.Error.Reason, cs.Error.Message)
	}
	count := map[scan.Severity]int{}
	for _, f := range cs.Findings {
		count[f.Severity]++
	}
	s := fmt.Sprintf("%d CRDs, %d findings (%d errors, %d warnings, %d info)", cs.CRDs, len(cs.Findings),
		count[scan.Error], count[scan.Warning], count[scan.Info])
	if len(cs.NotChecked) > 0 {
		s += "; not checked: " + strings.Join(cs.NotChecked, "; ")
	}
	return s
}

// printScanTable prints a row per finding and per cluster not read, then a
// summary line per cluster.
func printScanTable(w io.Writer, contexts []string, clusters map[string]ClusterScan) error {
	table := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Context", Type: "string"}, {Name: "CRD", Type: "string"}, {Name: "Severity", Type: "string"},
		{Name: "Rule", Type: "string"}, {Name: "Why", Type: "string"}, {Name: "Fix", Type: "string"},
	}}
	for _, name := range contexts {
		cs := clusters[name]
		if cs.Error != nil {
			table.Rows = append(table.Rows, metav1.TableRow{Cells: []any{name, "-", "error", "cluster-not-read",
				cs.Error.Reason + ": " + cs.Error.Message, fmt.Sprintf("kubectl --context %s get crd", name)}})
			continue
		}
		for _, f := range cs.Findings {
			table.Rows = append(table.Rows, metav1.TableRow{Cells: []any{name, f.CRD, string(f.Severity), f.Rule, f.Why, f.Fix}})
		}
	}
	if err := printers.NewTablePrinter(printers.PrintOptions{}).PrintObj(table, w); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	for _, name := range contexts {
		if err == nil {
			_, err = fmt.Fprintf(w, "%s: %s\n", name, clusters[name].Summary)
		}
	}
	return err
}

// readScan reads one cluster, with clients of its own, and runs the rules.
func (o *ScanOptions) readScan(ctx context.Context, t cluster) (scanned, error) {
	c, notChecked, err := readCluster(ctx, t.Config, o.release, o.config)
	if err != nil {
		return scanned{notChecked: notChecked}, err
	}
	c.Against, c.Context = o.against, t.Context
	return scanned{crds: len(c.CRDs), findings: scan.Scan(c), notChecked: notChecked}, nil
}

// readCluster reads what the scan's rules look at in one cluster, with
// clients of its own (GET and LIST only), and what it could not read (the
// permission it needs).
func readCluster(ctx context.Context, cfg *rest.Config, release map[string]*apiextensionsv1.CustomResourceDefinition,
	config check.Config) (scan.Cluster, []string, error) {
	c := scan.Cluster{Release: release, Config: config}
	var notChecked []string
	crdClient, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return c, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return c, nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return c, nil, err
	}
	if c.CRDs, err = listCRDs(ctx, crdClient, release != nil); err != nil {
		return c, nil, err
	}
	var note string
	if c.PolicyAPI, c.Policies, note, err = readPolicies(ctx, dyn); err != nil {
		return c, notChecked, err
	}
	notChecked = appendNote(notChecked, note)
	if c.InTree, note, err = readInTree(ctx, dyn); err != nil {
		return c, notChecked, err
	}
	notChecked = appendNote(notChecked, note)
	if c.Services, err = readServices(ctx, kube, scan.WebhookServices(c.CRDs)); err != nil {
		return c, notChecked, err
	}
	return c, notChecked, nil
}

func appendNote(notes []string, note string) []string {
	if note == "" {
		return notes
	}
	return append(notes, note)
}

// readPolicies lists the CRDVersionPolicies, keyed by the CRD they govern.
// A cluster without Graduator has none; a scan that may not list them says
// so (note) and goes on.
func readPolicies(ctx context.Context, dyn dynamic.Interface) (bool, map[string]scan.Policy, string, error) {
	list, err := dyn.Resource(graduatorv1alpha1.GroupVersion.WithResource("crdversionpolicies")).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return false, nil, "", nil
	case apierrors.IsForbidden(err):
		return true, nil, "CRDVersionPolicies (needs list on crdversionpolicies.graduator.io)", nil
	case err != nil:
		return false, nil, "", fmt.Errorf("list CRDVersionPolicies: %w", err)
	}
	policies := map[string]scan.Policy{}
	for _, item := range list.Items {
		var p graduatorv1alpha1.CRDVersionPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &p); err != nil {
			continue // graduator status shows an undecodable policy with its error
		}
		sp := scan.Policy{Name: p.Name}
		for _, u := range p.Spec.Unserve {
			sp.Unserve = append(sp.Unserve, u.Version)
		}
		if c := meta.FindStatusCondition(p.Status.Conditions, graduatorv1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
			sp.StalledReason, sp.StalledMessage = c.Reason, c.Message
		}
		policies[p.Name] = sp
	}
	return true, policies, "", nil
}

// readInTree lists the in-tree StorageVersionMigrations (Kubernetes 1.37+).
func readInTree(ctx context.Context, dyn dynamic.Interface) ([]scan.InTreeMigration, string, error) {
	list, err := dyn.Resource(svmv1.SchemeGroupVersion.WithResource("storageversionmigrations")).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return nil, "", nil
	case apierrors.IsForbidden(err):
		return nil, "StorageVersionMigrations (needs list on storageversionmigrations.storagemigration.k8s.io)", nil
	case err != nil:
		return nil, "", fmt.Errorf("list StorageVersionMigrations: %w", err)
	}
	var out []scan.InTreeMigration
	for _, item := range list.Items {
		var svm svmv1.StorageVersionMigration
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &svm); err != nil {
			return nil, "", fmt.Errorf("decode StorageVersionMigration %s: %w", item.GetName(), err)
		}
		m := scan.InTreeMigration{Name: svm.Name, Resource: svm.Spec.Resource.Resource + "." + svm.Spec.Resource.Group,
			Failed: storagemigration.PhaseOf(&svm) == storagemigration.Failed}
		if c := meta.FindStatusCondition(svm.Status.Conditions, string(svmv1.MigrationFailed)); c != nil {
			m.Message = c.Message
		}
		out = append(out, m)
	}
	return out, "", nil
}

// readServices reads the conversion webhooks' Services and counts their
// ready endpoints. Where the scan may not read them, the Service is
// "not checked" with the permission it needs.
func readServices(ctx context.Context, kube kubernetes.Interface, keys []scan.ServiceKey) (map[scan.ServiceKey]scan.Service, error) {
	out := map[scan.ServiceKey]scan.Service{}
	for _, key := range keys {
		_, err := kube.CoreV1().Services(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			out[key] = scan.Service{Missing: true}
			continue
		case apierrors.IsForbidden(err):
			out[key] = scan.Service{NotChecked: "forbidden: needs get on services in " + key.Namespace}
			continue
		case err != nil:
			return nil, fmt.Errorf("get Service %s/%s: %w", key.Namespace, key.Name, err)
		}
		eps, err := kube.DiscoveryV1().EndpointSlices(key.Namespace).List(ctx, metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=" + key.Name})
		switch {
		case apierrors.IsForbidden(err):
			out[key] = scan.Service{NotChecked: "forbidden: needs list on endpointslices.discovery.k8s.io in " + key.Namespace}
			continue
		case err != nil:
			return nil, fmt.Errorf("list the EndpointSlices of Service %s/%s: %w", key.Namespace, key.Name, err)
		}
		out[key] = scan.Service{ReadyEndpoints: readyEndpoints(eps.Items)}
	}
	return out, nil
}

// readyEndpoints counts the endpoints that are ready (an unset Ready
// condition means ready, as the EndpointSlice API says).
func readyEndpoints(slices []discoveryv1.EndpointSlice) int {
	n := 0
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				n++
			}
		}
	}
	return n
}
