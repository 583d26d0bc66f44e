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
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"

	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/snapshot"
)

// VerifyOptions is `graduator verify` in kubectl's plugin shape.
type VerifyOptions struct {
	flags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams

	at string
	// snapshotPath is --snapshot FILE, the snapshot to write.
	snapshotPath string
	// against is --against FILE, the snapshot to compare with.
	against  string
	output   string
	crdName  string
	resource schema.GroupVersionResource
	reader   *snapshot.Reader
	file     *os.File
	dyn      dynamic.Interface
	// crdClient reads the CRD.
	crdClient apiextensionsclient.Interface
}

// NewVerifyOptions returns the options of `graduator verify`, reading the
// kubeconfig through flags.
func NewVerifyOptions(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *VerifyOptions {
	return &VerifyOptions{flags: flags, IOStreams: streams}
}

// NewCmdVerify is `graduator verify CRD`. Every error but differences
// exits 2, usage errors included.
func NewCmdVerify(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewVerifyOptions(flags, streams)
	cmd := &cobra.Command{
		Use:   "verify CRD (--snapshot FILE | --against FILE) [--at VERSION]",
		Short: "Prove a migration kept every object's content: snapshot a CRD's objects, then compare them",
		Long: `With --snapshot, reads every object of the CRD (named <plural>.<group>) at one version,
a page at a time, and writes them to FILE, compressed: take it before a migration.

With --against, reads every object again at the version of the snapshot and compares it
with the snapshot: prints each object that differs (namespace/name and the fields that
differ, as JSON values), objects in only one of them, or "N objects identical".
metadata.resourceVersion and metadata.managedFields are not compared: a migration moves
the first and may clean the second.

Neither holds the objects in memory: the snapshot streams to the file, and the comparison
reads the file and the cluster side by side, both in the API server's (key) order.

Exits 0 when every object is identical (or the snapshot was written), 1 when some differ,
2 on bad input (an unknown CRD or version, a file that is not a snapshot, bad flags) or
any other error, as kubectl diff does.`,
		Example: `  graduator verify pizzas.restaurant.example.com --snapshot before.json.gz
  graduator migrate pizzas.restaurant.example.com
  graduator verify pizzas.restaurant.example.com --against before.json.gz`,
		Args: func(cmd *cobra.Command, args []string) error { return badInput(cobra.ExactArgs(1)(cmd, args)) },
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(args); err != nil {
				return badInput(err)
			}
			if err := o.Validate(); err != nil {
				return badInput(err)
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return badInput(err) })
	cmd.Flags().StringVar(&o.snapshotPath, "snapshot", "", "Write a snapshot of every object to this file (gzip, one JSON record an object).")
	cmd.Flags().StringVar(&o.against, "against", "", "Compare every object with the snapshot in this file.")
	cmd.Flags().StringVar(&o.at, "at", "", "The version to read objects at: the storage version by default when writing, the snapshot's version when comparing.")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format of a comparison: json prints one JSON object a difference, then the counts.")
	return cmd
}

// Validate refuses bad flags before anything is read.
func (o *VerifyOptions) Validate() error {
	switch {
	case (o.snapshotPath == "") == (o.against == ""):
		return errors.New("give exactly one of --snapshot FILE (write a snapshot) and --against FILE (compare with one)")
	case o.output != "" && o.output != "json":
		return fmt.Errorf("unknown output format %q: use json or leave it out", o.output)
	case o.output != "" && o.snapshotPath != "":
		return errors.New("-o applies to a comparison (--against), not to writing a snapshot")
	}
	return nil
}

// Complete takes the CRD's name and builds the clients; nothing is read yet.
func (o *VerifyOptions) Complete(args []string) error {
	o.crdName = args[0]
	cfg, err := restConfig(o.flags)
	if err != nil {
		return err
	}
	if o.crdClient, err = apiextensionsclient.NewForConfig(cfg); err != nil {
		return err
	}
	o.dyn, err = dynamic.NewForConfig(cfg)
	return err
}

// prepare reads the CRD and, to compare, the snapshot's header, and picks
// the version objects are read at.
func (o *VerifyOptions) prepare(ctx context.Context) error {
	crd, err := o.crdClient.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, o.crdName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get CustomResourceDefinition %s: %w", o.crdName, err)
	}
	version := o.at
	if o.against != "" {
		if o.file, err = os.Open(o.against); err != nil {
			return fmt.Errorf("read the snapshot: %w", err)
		}
		if o.reader, err = snapshot.NewReader(o.file); err != nil {
			return fmt.Errorf("%s: %w", o.against, err)
		}
		h := o.reader.Header
		if h.Group != crd.Spec.Group || h.Resource != crd.Spec.Names.Plural {
			return fmt.Errorf("%s is a snapshot of %s.%s, not of %s", o.against, h.Resource, h.Group, o.crdName)
		}
		if version != "" && version != h.Version {
			return fmt.Errorf("%s was read at %s: compare at the same version (leave --at out), or every object would differ by its apiVersion",
				o.against, h.Version)
		}
		version = h.Version
	}
	if version == "" {
		version = graduation.StorageVersion(crd)
	}
	if !apihelpers.HasServedCRDVersion(crd, version) {
		return fmt.Errorf("%s does not serve version %s (served: %s)", o.crdName, version, strings.Join(servedVersions(crd), ", "))
	}
	o.resource = graduation.ResourceAt(crd, version)
	return nil
}

// Run reads the CRD, then writes the snapshot or compares with it.
func (o *VerifyOptions) Run(ctx context.Context) error {
	defer o.close()
	if err := o.prepare(ctx); err != nil {
		return badInput(err)
	}
	if o.snapshotPath != "" {
		n, err := writeSnapshot(ctx, o.dyn, o.resource, o.snapshotPath)
		if err != nil {
			return badInput(err)
		}
		_, _ = fmt.Fprintf(o.Out, "%d objects of %s read at %s: snapshot written to %s\n", n, o.crdName, o.resource.Version, o.snapshotPath)
		return nil
	}
	printer := newDifferencePrinter(o.Out, o.output == "json")
	sum, err := snapshot.Compare(ctx, o.dyn, o.reader, printer.print)
	if err != nil {
		return badInput(fmt.Errorf("compare %s with %s: %w", o.crdName, o.against, err))
	}
	if err := printer.summary(sum); err != nil {
		return badInput(err)
	}
	if sum.Differences() > 0 {
		return &exitError{code: ExitError, err: fmt.Errorf("%d objects of %s differ from the snapshot %s", sum.Differences(), o.crdName, o.against)}
	}
	return nil
}

func (o *VerifyOptions) close() {
	if o.file != nil {
		_ = o.file.Close()
	}
}

// writeSnapshot writes the snapshot to a temporary file next to path and
// renames it when complete, so that path never holds half a snapshot.
func writeSnapshot(ctx context.Context, dyn dynamic.Interface, resource schema.GroupVersionResource, path string) (int, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return 0, fmt.Errorf("write the snapshot: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // a no-op once renamed
	n, err := snapshot.Write(ctx, dyn, resource, tmp)
	if closeErr := tmp.Close(); err == nil && closeErr != nil {
		err = fmt.Errorf("write the snapshot: %w", closeErr)
	}
	if err != nil {
		return n, fmt.Errorf("snapshot %s: %w", resource, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return n, fmt.Errorf("write the snapshot: %w", err)
	}
	return n, nil
}

// compareSnapshot compares the cluster with the snapshot in path, printing
// each difference as it is found.
func compareSnapshot(ctx context.Context, dyn dynamic.Interface, path string, p *differencePrinter) (snapshot.Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return snapshot.Summary{}, fmt.Errorf("read the snapshot: %w", err)
	}
	defer func() { _ = f.Close() }()
	r, err := snapshot.NewReader(f)
	if err != nil {
		return snapshot.Summary{}, fmt.Errorf("%s: %w", path, err)
	}
	return snapshot.Compare(ctx, dyn, r, p.print)
}

// differencePrinter prints differences as text for a person, or as one JSON
// object a line.
type differencePrinter struct {
	w      io.Writer
	asJSON bool
	enc    *json.Encoder
	// prefix starts each difference's first line (text).
	prefix string
	// collect, when set, takes the differences instead of printing them.
	collect func(snapshot.Difference)
}

func newDifferencePrinter(w io.Writer, asJSON bool) *differencePrinter {
	return &differencePrinter{w: w, asJSON: asJSON, enc: json.NewEncoder(w)}
}

func (p *differencePrinter) print(d snapshot.Difference) error {
	if p.collect != nil {
		p.collect(d)
		return nil
	}
	if p.asJSON {
		return p.enc.Encode(d)
	}
	_, err := io.WriteString(p.w, p.prefix+formatDifference(d))
	return err
}

func (p *differencePrinter) summary(s snapshot.Summary) error {
	if p.asJSON {
		return p.enc.Encode(s)
	}
	_, err := fmt.Fprintln(p.w, formatSummary(s))
	return err
}

// formatDifference is one object that differs, as a person reads it.
func formatDifference(d snapshot.Difference) string {
	switch d.What {
	case snapshot.Missing:
		return d.Object + ": only in the snapshot (deleted since)\n"
	case snapshot.Added:
		return d.Object + ": only in the cluster (created since)\n"
	}
	var b strings.Builder
	b.WriteString(d.Object + ": changed\n")
	for _, c := range d.Changes {
		b.WriteString("  " + c.String() + "\n")
	}
	return b.String()
}

// formatSummary is the last line of a comparison.
func formatSummary(s snapshot.Summary) string {
	if s.Differences() == 0 {
		return fmt.Sprintf("%d objects identical", s.Identical)
	}
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{s.Changed, "changed"}, {s.Missing, "only in the snapshot"}, {s.Added, "only in the cluster"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	return fmt.Sprintf("%d objects differ (%s), %d identical", s.Differences(), strings.Join(parts, ", "), s.Identical)
}

func servedVersions(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var served []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			served = append(served, v.Name)
		}
	}
	return served
}

// versionSnapshot is a snapshot file of `migrate --verify`.
type versionSnapshot struct {
	version, path string
}

// verifyResult is what `migrate --verify` found, over every served version.
type verifyResult struct {
	Versions    []string `json:"versions"`
	Identical   int      `json:"identical"`
	Differences int      `json:"differences"`
	// First names the first differences (at most maxDifferencesKept), with the
	// version they were read at.
	First []versionDifference `json:"first,omitempty"`
}

type versionDifference struct {
	Version string `json:"version"`
	snapshot.Difference
}

// maxDifferencesKept bounds verifyResult.First.
const maxDifferencesKept = 20

func (v *verifyResult) differ() bool { return v != nil && v.Differences > 0 }

func (v *verifyResult) String() string {
	if v.Differences == 0 {
		return fmt.Sprintf("verified: %d objects identical at %s", v.Identical, strings.Join(v.Versions, ", "))
	}
	return fmt.Sprintf("verified: %d objects differ at %s (listed above), %d identical; storedVersions not pruned",
		v.Differences, strings.Join(v.Versions, ", "), v.Identical)
}

func removeSnapshots(snaps []versionSnapshot) {
	if len(snaps) > 0 {
		_ = os.RemoveAll(filepath.Dir(snaps[0].path))
	}
}
