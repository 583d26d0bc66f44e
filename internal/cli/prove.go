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
	"text/tabwriter"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/dynamic"

	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/internal/paging"
	"github.com/graduator/graduator/internal/roundtrip"
	"github.com/graduator/graduator/migration"
)

// ProveOptions is `graduator prove` in kubectl's plugin shape. It exits 0
// when the conversion is lossless, 1 when it loses a field, 2 on bad input
// or when the proof could not be made (check's convention).
type ProveOptions struct {
	flags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams

	output  string
	writeTo string
	proof   roundtrip.Options

	crdName string
	crd     *apiextensionsv1.CustomResourceDefinition
	dyn     dynamic.Interface
}

// NewProveOptions returns the options of `graduator prove`, reading the
// kubeconfig through flags.
func NewProveOptions(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *ProveOptions {
	return &ProveOptions{flags: flags, IOStreams: streams, output: "text", writeTo: string(migration.WriteToObject),
		proof: roundtrip.Options{PageSize: paging.DefaultPageSize}}
}

// NewCmdProve is `graduator prove CRD`.
func NewCmdProve(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewProveOptions(flags, streams)
	cmd := &cobra.Command{
		Use:   "prove CRD",
		Short: "Prove that the CRD's conversion keeps every object's content (for CI, before a release)",
		Long: `For each old version objects of the CRD (named <plural>.<group>) are still stored in, reads the
objects at that version and converts them old -> target -> old, the round trip a storage
migration makes permanent, then compares each with itself. A field that comes back missing or
different is lost; a field the conversion adds (a default) is not, nor is server-owned metadata.

Every object is proven: one paged pass reads them whole, and each page is sent to the CRD's
conversion webhook both ways in batched reviews while the next page is read, each answer
pruned and defaulted by its version's schema as the API server does (with strategy None, only
the pruning and defaulting). Once the target is the storage version, the objects carrying
every value class are also round-tripped by a dry-run no-op write at their old version, the
API server's own path; and where this process cannot reach the webhook (a Service's name from
outside the cluster), every object is. --sample proves only a sample that carries every field
path and value class: per path its zero value, a null, each value of a path holding no more
than 16 and each value of an enum the schema declares, each JSON type, the smallest and
largest number, the longest string, an empty, a one-item and the longest list or map. Nothing
is written.

A conversion whose output depends on anything but the object cannot be proven this way.

Exits 0 when nothing is lost (or only --accept-loss paths), 1 when a field is lost, 2 on bad
input (bad flags included) or when the proof could not be made (a webhook unreachable).`,
		Example: `  graduator prove pizzas.restaurant.example.com --to v1
  graduator prove cronjobs.batch.tutorial.kubebuilder.io --to v2 --accept-loss /status/conditions -o markdown`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return badInput(fmt.Errorf("graduator prove needs the CRD's name, got %d arguments", len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return badInput(err)
			}
			if err := o.Complete(cmd.Context(), args); err != nil {
				return badInput(err)
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return badInput(err) })
	cmd.Flags().StringVarP(&o.output, "output", "o", o.output, "Output format: text, json or markdown.")
	cmd.Flags().StringVar(&o.proof.Target, "to", "", "The version the graduation goes to; the CRD's storage version when empty.")
	cmd.Flags().BoolVar(&o.proof.Sample, "sample", false,
		"Prove a sample carrying every field path and value class, not every object: faster, blind to a loss only a value outside the classes triggers.")
	// Every object is the default now; the flag stays for scripts that set it.
	cmd.Flags().Bool("every", true, "Prove every object (the default).")
	_ = cmd.Flags().MarkDeprecated("every", "every object is proven by default; --sample opts out")
	cmd.Flags().StringArrayVar(&o.proof.AcceptLoss, "accept-loss", nil,
		"A field path whose loss is accepted (repeatable): a JSON pointer with * for list items, such as /status/conditions/*/reason.")
	cmd.Flags().Int64Var(&o.proof.PageSize, "page-size", o.proof.PageSize, "Objects per LIST page.")
	cmd.Flags().StringVar(&o.writeTo, "write-to", o.writeTo,
		"Where the dry-run no-op writes go, as the migration's will: Object, or Status (the /status subresource).")
	return cmd
}

// Validate refuses bad flags before anything is read.
func (o *ProveOptions) Validate() error {
	switch o.output {
	case "text", "json", "markdown":
	default:
		return fmt.Errorf("unknown output format %q: use text, json or markdown", o.output)
	}
	if o.writeTo != string(migration.WriteToObject) && o.writeTo != string(migration.WriteToStatus) {
		return fmt.Errorf("--write-to must be %s or %s, got %q", migration.WriteToObject, migration.WriteToStatus, o.writeTo)
	}
	if o.proof.PageSize < 1 {
		return fmt.Errorf("--page-size must be at least 1, got %d", o.proof.PageSize)
	}
	for _, p := range o.proof.AcceptLoss {
		if !roundtrip.ValidPath(p) {
			return fmt.Errorf("--accept-loss %q is not a field path such as /spec/items/*/name", p)
		}
	}
	o.proof.WriteTo = migration.WriteTarget(o.writeTo)
	return nil
}

// Complete reads the CRD and builds the dynamic client; a CRD or version
// that does not exist is bad input.
func (o *ProveOptions) Complete(ctx context.Context, args []string) error {
	o.crdName = args[0]
	cfg, err := restConfig(o.flags)
	if err != nil {
		return err
	}
	crds, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if o.crd, err = crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, o.crdName, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("no CustomResourceDefinition %s", o.crdName)
		}
		return fmt.Errorf("read CRD %s: %w", o.crdName, err)
	}
	if o.proof.Target == "" {
		o.proof.Target = graduation.StorageVersion(o.crd)
	}
	if o.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	return nil
}

// Run proves and prints the report; a loss exits 1, a proof that could not
// be made exits 2.
func (o *ProveOptions) Run(ctx context.Context) error {
	result, err := roundtrip.Prove(ctx, o.dyn, o.crd, o.proof)
	if err != nil {
		return badInput(fmt.Errorf("the proof could not be made: %w", err))
	}
	switch o.output {
	case "json":
		err = printJSON(o.Out, result, &printers.JSONPrinter{})
	case "markdown":
		err = writeProofMarkdown(o.Out, result)
	default:
		err = writeProofText(o.Out, result)
	}
	if err != nil {
		return err
	}
	if !result.Lossless() {
		return &exitError{code: ExitError, err: fmt.Errorf("%s; fix the conversion webhook or the schema of %s, or %s",
			result.Message(), result.Target, graduation.AcceptLossFlag.Advice(result.LostPaths()))}
	}
	return nil
}

func writeProofText(w io.Writer, r roundtrip.Result) error {
	_, _ = fmt.Fprintf(w, "%s (%s) through %s, by %s, %s\n", r.CRD, r.Kind, r.Target, r.Source, scope(r))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "VERSION\tLISTED\tPROVEN\tPATHS\tLOST\tACCEPTED")
	for _, v := range r.Versions {
		_, _ = fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\n", v.Version, v.Listed, v.Sampled, v.Paths, len(v.Losses), len(v.Accepted))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, v := range r.Versions {
		for _, l := range v.Losses {
			_, _ = fmt.Fprintf(w, "LOST      %s at %s: %s\n", l.Path, v.Version, lossDetail(l, v))
		}
		for _, l := range v.Accepted {
			_, _ = fmt.Fprintf(w, "ACCEPTED  %s at %s: %s\n", l.Path, v.Version, lossDetail(l, v))
		}
	}
	for _, v := range r.Unserved {
		_, _ = fmt.Fprintf(w, "NOT PROVEN  %s: objects are stored in it but it is not served\n", v)
	}
	_, err := fmt.Fprintln(w, r.Message())
	return err
}

func lossDetail(l roundtrip.Loss, v roundtrip.VersionResult) string {
	return fmt.Sprintf("%d of %d proven (%d of %d listed carry it): %s", l.Objects, v.Sampled, l.Carriers, v.Listed,
		strings.Join(l.Examples, ", "))
}

// scope says which objects were proven.
func scope(r roundtrip.Result) string {
	if r.Every {
		return "every object"
	}
	return "a sample"
}

func writeProofMarkdown(w io.Writer, r roundtrip.Result) error {
	icon := "✅"
	if !r.Lossless() {
		icon = "❌"
	}
	var b strings.Builder
	_, _ = fmt.Fprintf(&b, "### %s Round trip of `%s` through %s (%s, %s)\n\n%s\n\n", icon, r.CRD, r.Target, r.Source, scope(r), r.Message())
	if len(r.Versions) > 0 {
		b.WriteString("| version | listed | proven | paths | lost | accepted |\n| --- | --- | --- | --- | --- | --- |\n")
		for _, v := range r.Versions {
			_, _ = fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d |\n", v.Version, v.Listed, v.Sampled, v.Paths, len(v.Losses), len(v.Accepted))
		}
	}
	for _, v := range r.Versions {
		for _, l := range v.Losses {
			_, _ = fmt.Fprintf(&b, "\n- ❌ `%s` at %s: %s", l.Path, v.Version, lossDetail(l, v))
		}
		for _, l := range v.Accepted {
			_, _ = fmt.Fprintf(&b, "\n- ⚠️ accepted `%s` at %s: %s", l.Path, v.Version, lossDetail(l, v))
		}
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}
