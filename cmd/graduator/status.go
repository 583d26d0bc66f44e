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

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
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

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/graduation"
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
}

// statusOptions is `graduator status` in kubectl's plugin shape.
type statusOptions struct {
	flags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams
	output string

	crdName   string
	crdClient apiextensionsclient.Interface
	dyn       dynamic.Interface
	kube      kubernetes.Interface
}

func newStatusCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &statusOptions{flags: flags, IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "status [CRD]",
		Short: "Show the storage and served versions of every CRD, drift, and each policy's phase",
		Long: `Lists every CustomResourceDefinition with its storage version, its stored versions
(status.storedVersions), its served and deprecated versions, drift (a stored version
that is no longer the storage version, so objects may still be encoded in it), and the
phase and Ready reason of the CRDVersionPolicy that governs it, if any.

With a CRD's name, shows that CRD in detail: its policy's conditions with their reasons and
messages, the migration's counts and first failures, and the policy's latest Events: what
to read when a graduation is blocked.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.crdName = args[0]
			}
			if err := o.Validate(); err != nil {
				return err
			}
			if err := o.Complete(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "table", "Output format: table or json.")
	return cmd
}

// Validate refuses an unknown output format before anything is read.
func (o *statusOptions) Validate() error {
	if o.output != "table" && o.output != "json" {
		return fmt.Errorf("unknown output format %q: use table or json", o.output)
	}
	return nil
}

// Complete builds the clients.
func (o *statusOptions) Complete() error {
	cfg, err := restConfig(o.flags)
	if err != nil {
		return err
	}
	if o.crdClient, err = apiextensionsclient.NewForConfig(cfg); err != nil {
		return err
	}
	if o.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	o.kube, err = kubernetes.NewForConfig(cfg)
	return err
}

// Run reads the CRDs and policies and prints them.
func (o *statusOptions) Run(ctx context.Context) error {
	if o.crdName != "" {
		return o.describeCRD(ctx, o.crdName)
	}
	rows, err := collectStatus(ctx, o.crdClient, o.dyn)
	if err != nil {
		return err
	}
	if o.output == "json" {
		enc := json.NewEncoder(o.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	return printStatusTable(o.Out, rows)
}

// collectStatus reads every CRD and every policy. Policies are optional: a
// cluster without the operator installed still gets the CRD columns.
func collectStatus(ctx context.Context, crdClient apiextensionsclient.Interface, dyn dynamic.Interface) ([]CRDStatus, error) {
	crds, err := crdClient.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list CustomResourceDefinitions: %w", err)
	}
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
	return statusRows(crds.Items, policies, undecodable), nil
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
	if fleet := p.Labels["graduator.io/fleet"]; fleet != "" {
		row.Policy = fleet + " (selector)"
	}
	row.PolicyPhase = string(p.Status.Phase)
	if row.PolicyPhase == "" {
		row.PolicyPhase = "Pending"
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, graduatorv1alpha1.ConditionReady); c != nil {
		row.Ready, row.Reason, row.Message = string(c.Status), c.Reason, c.Message
	}
}

// printStatusTable prints the rows through cli-runtime's table printer, as
// kubectl get does.
func printStatusTable(w io.Writer, rows []CRDStatus) error {
	table := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "CRD", Type: "string"}, {Name: "Storage", Type: "string"}, {Name: "Stored", Type: "string"},
		{Name: "Served", Type: "string"}, {Name: "Deprecated", Type: "string"}, {Name: "Drift", Type: "string"},
		{Name: "Policy", Type: "string"}, {Name: "Phase", Type: "string"}, {Name: "Reason", Type: "string"},
	}}
	for _, r := range rows {
		drift := "-"
		if len(r.Drift) > 0 {
			drift = "stale: " + strings.Join(r.Drift, ",")
		}
		reason := orDash(r.Reason)
		if r.PolicyError != "" {
			reason = "cannot decode the policy: " + r.PolicyError
		}
		table.Rows = append(table.Rows, metav1.TableRow{Cells: []any{
			r.Name, orDash(r.StorageVersion), list(r.StoredVersions), list(r.Served), list(r.Deprecated), drift, orDash(r.Policy),
			orDash(r.PolicyPhase), reason,
		}})
	}
	return printers.NewTablePrinter(printers.PrintOptions{}).PrintObj(table, w)
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
