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
	"text/tabwriter"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"

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
	Drift       []string `json:"drift,omitempty"`
	PolicyPhase string   `json:"policyPhase,omitempty"`
	Ready       string   `json:"ready,omitempty"`
	// Reason is the Ready condition's reason: why a graduation waits or
	// stalls (ConversionFailed, Forbidden, ...).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// PolicyError says why the policy could not be read, when it could not.
	PolicyError string `json:"policyError,omitempty"`
}

func newStatusCommand(flags *genericclioptions.ConfigFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the storage and served versions of every CRD, drift, and each policy's phase",
		Long: `Lists every CustomResourceDefinition with its storage version, its stored versions
(status.storedVersions), its served and deprecated versions, drift (a stored version
that is no longer the storage version, so objects may still be encoded in it), and the
phase of the CRDVersionPolicy that governs it, if any.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("unknown output format %q: use table or json", output)
			}
			cfg, err := restConfig(flags)
			if err != nil {
				return err
			}
			crdClient, err := apiextensionsclient.NewForConfig(cfg)
			if err != nil {
				return err
			}
			dyn, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return err
			}
			rows, err := collectStatus(cmd.Context(), crdClient, dyn)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			return printStatusTable(cmd.OutOrStdout(), rows)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "Output format: table or json.")
	return cmd
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
	row.PolicyPhase = string(p.Status.Phase)
	if row.PolicyPhase == "" {
		row.PolicyPhase = "Pending"
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, graduatorv1alpha1.ConditionReady); c != nil {
		row.Ready, row.Reason, row.Message = string(c.Status), c.Reason, c.Message
	}
}

func printStatusTable(w io.Writer, rows []CRDStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "CRD\tSTORAGE\tSTORED\tSERVED\tDEPRECATED\tDRIFT\tPOLICY\tREASON")
	for _, r := range rows {
		drift := "-"
		if len(r.Drift) > 0 {
			drift = "stale: " + strings.Join(r.Drift, ",")
		}
		policy := "-"
		if r.PolicyPhase != "" {
			policy = r.PolicyPhase
		}
		reason := orDash(r.Reason)
		if r.PolicyError != "" {
			reason = "cannot decode the policy: " + r.PolicyError
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, orDash(r.StorageVersion), list(r.StoredVersions),
			list(r.Served), list(r.Deprecated), drift, policy, reason)
	}
	return tw.Flush()
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
