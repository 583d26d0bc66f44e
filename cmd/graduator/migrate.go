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
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graduator/graduator/graduation"
	"github.com/graduator/graduator/migration"
)

// migrateSummary is what `graduator migrate -o json` prints.
type migrateSummary struct {
	CRD            string              `json:"crd"`
	StorageVersion string              `json:"storageVersion"`
	Complete       bool                `json:"complete"`
	Listed         int64               `json:"listed"`
	Rewritten      int64               `json:"rewritten"`
	Skipped        int64               `json:"skipped"`
	Failed         int64               `json:"failed"`
	CaughtUp       int64               `json:"caughtUp"`
	Failures       []migration.Failure `json:"failures,omitempty"`
	Pruned         bool                `json:"pruned"`
	StoredVersions []string            `json:"storedVersions"`
}

func newMigrateCommand(flags *genericclioptions.ConfigFlags) *cobra.Command {
	var (
		opts   migration.Options
		qps    float64
		prune  bool
		output string
	)
	cmd := &cobra.Command{
		Use:   "migrate CRD",
		Short: "Rewrite every object of a CRD in its storage version, then optionally prune storedVersions",
		Long: `Rewrites every object of the CRD (named <plural>.<group>) through the API server, so that
etcd holds it in the CRD's current storage version. With --prune, and only when every
object was rewritten, status.storedVersions is then set to the storage version, after
which old versions can be removed from the CRD.

Exits 0 when every object was rewritten, 2 when some could not be (they are listed),
1 on any other error.`,
		Example: `  graduator migrate pizzas.restaurant.example.com --prune
  kubectl graduator migrate pizzas.restaurant.example.com --qps 50 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" {
				return fmt.Errorf("unknown output format %q: use json or leave it out", output)
			}
			opts.QPS = float32(qps)
			return runMigrate(cmd, flags, args[0], opts, prune, output)
		},
	}
	cmd.Flags().IntVar(&opts.Concurrency, "concurrency", migration.DefaultConcurrency,
		"Upper bound on writes in flight; the number adapts below it to what the API server takes.")
	cmd.Flags().Int64Var(&opts.PageSize, "page-size", migration.DefaultPageSize, "Objects per LIST page.")
	cmd.Flags().Float64Var(&qps, "qps", 0, "Optional ceiling on writes per second; 0: none (API Priority and Fairness and the adaptive limit protect the API server).")
	cmd.Flags().BoolVar(&prune, "prune", false, "Prune status.storedVersions to the storage version after a complete run without failures.")
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json prints the final counts.")
	return cmd
}

func runMigrate(cmd *cobra.Command, flags *genericclioptions.ConfigFlags, crdName string, opts migration.Options, prune bool, output string) error {
	ctx := cmd.Context()
	cfg, err := restConfig(flags)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	opts.Config = cfg
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: crdName}, &crd); err != nil {
		return fmt.Errorf("get CustomResourceDefinition %s: %w", crdName, err)
	}
	storage := graduation.StorageVersion(&crd)
	opts.Resource = resourceAt(&crd, storage)

	out := cmd.OutOrStdout()
	progress := newProgressReporter(cmd.ErrOrStderr(), crdName, storage, output == "json")
	opts.OnProgress = progress.update
	result, err := migration.Run(ctx, dyn, opts)
	progress.done(result.Progress)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", crdName, err)
	}

	summary := migrateSummary{
		CRD: crdName, StorageVersion: storage, Complete: result.Complete,
		Listed: result.Listed, Rewritten: result.Rewritten, Skipped: result.Skipped, Failed: result.Failed,
		CaughtUp: result.CaughtUp, Failures: result.Failures, StoredVersions: crd.Status.StoredVersions,
	}
	var pruneErr error
	if prune {
		pruneErr = migration.PruneStoredVersions(ctx, c, crdName, migration.Expectation{
			StorageVersion: storage, Generation: crd.Generation, Complete: result.Complete, Failed: result.Failed,
		})
		if pruneErr == nil {
			summary.Pruned = true
			summary.StoredVersions = []string{storage}
		}
	}

	if output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(summary); err != nil {
			return err
		}
	} else {
		printSummary(out, summary)
	}
	switch {
	case result.Failed > 0:
		return &exitError{code: 2, err: fmt.Errorf("%d objects of %s could not be rewritten", result.Failed, crdName)}
	case pruneErr != nil:
		return pruneErr
	}
	return nil
}

func printSummary(w io.Writer, s migrateSummary) {
	lines := []string{fmt.Sprintf("%s: %d listed, %d rewritten as %s, %d skipped, %d failed; %d written during the run caught up",
		s.CRD, s.Listed, s.Rewritten, s.StorageVersion, s.Skipped, s.Failed, s.CaughtUp)}
	for _, f := range s.Failures {
		lines = append(lines, "  failed: "+f.String())
	}
	if s.Pruned {
		lines = append(lines, fmt.Sprintf("status.storedVersions pruned to [%s]", s.StorageVersion))
	} else {
		lines = append(lines, fmt.Sprintf("status.storedVersions: [%s]", strings.Join(s.StoredVersions, ", ")))
	}
	_, _ = fmt.Fprintln(w, strings.Join(lines, "\n"))
}

// progressReporter draws a progress bar on a terminal and prints one line a
// page otherwise (CI logs), and nothing with -o json.
type progressReporter struct {
	w     io.Writer
	bar   *progressbar.ProgressBar
	quiet bool
	name  string
}

func newProgressReporter(w io.Writer, crdName, version string, quiet bool) *progressReporter {
	r := &progressReporter{w: w, quiet: quiet, name: crdName}
	if f, ok := w.(*os.File); ok && !quiet && term.IsTerminal(int(f.Fd())) {
		// The total is unknown until the listing ends: a spinner with counts.
		r.bar = progressbar.NewOptions64(-1,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(fmt.Sprintf("migrating %s to %s", crdName, version)),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("objects"),
			progressbar.OptionClearOnFinish(),
		)
	}
	return r
}

func (r *progressReporter) update(p migration.Progress) {
	switch {
	case r.quiet:
	case r.bar != nil:
		if p.Remaining >= 0 {
			r.bar.ChangeMax64(p.Listed + p.Remaining)
		}
		r.bar.Describe(fmt.Sprintf("migrating %s (%d writers, %d failed)", r.name, p.Writers, p.Failed))
		_ = r.bar.Set64(p.Rewritten + p.Skipped + p.Failed)
	default:
		_, _ = fmt.Fprintf(r.w, "%s: %d listed, %d rewritten, %d skipped, %d failed, %d writers\n",
			r.name, p.Listed, p.Rewritten, p.Skipped, p.Failed, p.Writers)
	}
}

func (r *progressReporter) done(migration.Progress) {
	if r.bar != nil {
		_ = r.bar.Finish()
	}
}

func resourceAt(crd *apiextensionsv1.CustomResourceDefinition, version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: crd.Spec.Group, Version: version, Resource: crd.Spec.Names.Plural}
}
