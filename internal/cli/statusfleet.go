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
	"strings"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/graduator/graduator/internal/graduation"
)

// ClusterStatus is one cluster of `graduator status` across contexts: its
// CRDs' rows, or why it could not be read.
type ClusterStatus struct {
	Error   *ClusterError `json:"error,omitempty"`
	Summary string        `json:"summary"`
	CRDs    []CRDStatus   `json:"crds"`
}

// printClusters reads every cluster and prints them; a cluster that could
// not be read exits 1 after the others are shown.
func (o *StatusOptions) printClusters(ctx context.Context) error {
	rows, errs := eachCluster(ctx, o.targets, o.clusters.parallel, readStatus)
	out := map[string]ClusterStatus{}
	contexts := make([]string, len(o.targets))
	var failed []string
	for i, t := range o.targets {
		contexts[i] = t.Context
		cs := ClusterStatus{CRDs: rows[i], Error: clusterError(errs[i])}
		if cs.CRDs == nil {
			cs.CRDs = []CRDStatus{}
		}
		cs.Summary = statusSummary(cs)
		if cs.Error != nil {
			failed = append(failed, t.Context)
		}
		out[t.Context] = cs
	}
	var err error
	switch o.output {
	case "json":
		err = printJSON(o.Out, out, &printers.JSONPrinter{})
	case "yaml":
		err = printJSON(o.Out, out, &printers.YAMLPrinter{})
	default:
		err = printClusterStatusTable(o.Out, contexts, out, o.output == "wide")
	}
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return &exitError{code: ExitError, err: fmt.Errorf("%d of %d clusters could not be read: %s", len(failed), len(o.targets),
			strings.Join(failed, ", "))}
	}
	return nil
}

// readStatus reads one cluster's status with clients of its own.
func readStatus(ctx context.Context, cfg *rest.Config) ([]CRDStatus, error) {
	crdClient, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	crds, err := listCRDs(ctx, crdClient, false)
	if err != nil {
		return nil, err
	}
	return collectStatus(ctx, crds, dyn, time.Now())
}

// statusSummary is a cluster's line under the table.
func statusSummary(cs ClusterStatus) string {
	if cs.Error != nil {
		return fmt.Sprintf("not read (%s): %s", cs.Error.Reason, cs.Error.Message)
	}
	var drift, governed, stalled int
	for _, r := range cs.CRDs {
		if len(r.Drift) > 0 {
			drift++
		}
		if r.Policy != "" {
			governed++
		}
		if r.Ready == string(metav1.ConditionFalse) && graduation.Permanent(r.Reason) {
			stalled++
		}
	}
	return fmt.Sprintf("%d CRDs, %d with drift, %d governed by a policy, %d stalled", len(cs.CRDs), drift, governed, stalled)
}

// printClusterStatusTable is the status table with a CONTEXT column, a row
// with the reason for each cluster not read, and a summary line per
// cluster under it.
func printClusterStatusTable(w io.Writer, contexts []string, clusters map[string]ClusterStatus, wide bool) error {
	table := &metav1.Table{ColumnDefinitions: append([]metav1.TableColumnDefinition{{Name: "Context", Type: "string"}},
		statusColumns()...)}
	for _, name := range contexts {
		cs := clusters[name]
		if cs.Error != nil {
			cells := []any{name}
			for range len(statusColumns()) - 1 {
				cells = append(cells, "-")
			}
			table.Rows = append(table.Rows, metav1.TableRow{Cells: append(cells, cs.Error.Reason+": "+cs.Error.Message)})
			continue
		}
		for _, r := range cs.CRDs {
			table.Rows = append(table.Rows, metav1.TableRow{Cells: append([]any{name}, statusCells(r)...)})
		}
	}
	if err := printers.NewTablePrinter(printers.PrintOptions{Wide: wide}).PrintObj(table, w); err != nil {
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
