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
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"

	"github.com/graduator/graduator/internal/check"
)

// CheckOptions is `graduator check` in kubectl's plugin shape: Complete
// reads the inputs, Validate refuses bad ones, Run compares and reports.
// Every error but an unsafe change exits 2, usage errors included.
type CheckOptions struct {
	flags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams

	output     string
	configFile string
	listRules  bool
	// allowEmpty is --allow-empty: a side without any CRD is meant.
	allowEmpty bool

	oldArg, newArg string
	config         check.Config
	oldCRDs        map[string]*apiextensionsv1.CustomResourceDefinition
	newCRDs        map[string]*apiextensionsv1.CustomResourceDefinition
}

// NewCheckOptions returns the options of `graduator check`, reading the
// kubeconfig through flags for the cluster source.
func NewCheckOptions(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *CheckOptions {
	return &CheckOptions{flags: flags, IOStreams: streams, output: "text"}
}

// NewCmdCheck is `graduator check OLD NEW`.
func NewCmdCheck(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewCheckOptions(flags, streams)
	cmd := &cobra.Command{
		Use:   "check OLD NEW",
		Short: "Tell whether a change of CRDs is safe to ship (for CI)",
		Long: `Compares the CRDs of OLD with those of NEW, paired by name, and reports what could break
existing objects or clients: schema changes (a field removed, a type changed, a constraint
tightened, ...) and storage changes (a version removed while objects are still stored in it).

OLD and NEW are each a file (YAML or JSON, many documents, e.g. the output of kustomize build
or helm template; documents that are not CRDs are ignored), a directory, - for stdin, or
cluster: the live CRDs of your kubeconfig, the only source that knows status.storedVersions
(as OLD, only the CRDs that NEW names are compared: a cluster holds other projects' CRDs).

A side without any CRD is almost always the wrong file: it exits 2 unless --allow-empty
(a first release: OLD holds none; a last one: NEW holds none).

Exits 0 when nothing is at error level, 1 when the change is unsafe, 2 on bad input
(bad flags included). Rules and their default enforcement: graduator check --list-rules.`,
		Example: `  graduator check cluster ./config/crd           # this branch against the live cluster
  graduator check old.yaml new.yaml -o markdown    # for a pull-request comment
  kustomize build config/crd | graduator check cluster -`,
		Args: func(cmd *cobra.Command, args []string) error {
			if o.listRules {
				return nil
			}
			if len(args) != 2 {
				return badInput(fmt.Errorf("graduator check needs OLD and NEW, got %d arguments", len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.listRules {
				for _, r := range check.Rules {
					_, _ = fmt.Fprintf(o.Out, "%-36s %-8s %s\n", r.Name, r.Default, r.Doc)
				}
				return nil
			}
			if err := o.Complete(cmd.Context(), args); err != nil {
				return badInput(err)
			}
			if err := o.Validate(); err != nil {
				return badInput(err)
			}
			return o.Run()
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return badInput(err) })
	cmd.Flags().StringVarP(&o.output, "output", "o", o.output, "Output format: text, json or markdown.")
	cmd.Flags().StringVar(&o.configFile, "config", "", "A YAML file setting rules' enforcement: {enforcement: {RULE: error|warning|none}}.")
	cmd.Flags().BoolVar(&o.listRules, "list-rules", false, "List the rules with their default enforcement and exit.")
	cmd.Flags().BoolVar(&o.allowEmpty, "allow-empty", false,
		"Accept an OLD or NEW without any CRD (a first or a last release); without it such a side is bad input (exit 2).")
	return cmd
}

// Complete reads the config and both sides.
func (o *CheckOptions) Complete(ctx context.Context, args []string) error {
	o.oldArg, o.newArg = args[0], args[1]
	if o.configFile != "" {
		data, err := os.ReadFile(o.configFile)
		if err != nil {
			return err
		}
		if err := yaml.UnmarshalStrict(data, &o.config); err != nil {
			return fmt.Errorf("config %s: %w", o.configFile, err)
		}
	}
	source := check.Source{Stdin: o.In, Live: o.liveCRDs}
	var err error
	if o.oldCRDs, err = source.Load(ctx, o.oldArg); err != nil {
		return fmt.Errorf("OLD %s: %w", o.oldArg, err)
	}
	if o.newCRDs, err = source.Load(ctx, o.newArg); err != nil {
		return fmt.Errorf("NEW %s: %w", o.newArg, err)
	}
	if o.oldArg == check.Cluster {
		// A cluster holds the CRDs of many projects: a release that does not
		// ship one of them does not remove it.
		for name := range o.oldCRDs {
			if _, ok := o.newCRDs[name]; !ok {
				delete(o.oldCRDs, name)
			}
		}
	}
	return nil
}

// Validate refuses an unknown output or config, and a side without any
// CRD unless --allow-empty.
func (o *CheckOptions) Validate() error {
	switch o.output {
	case "text", "json", "markdown":
	default:
		return fmt.Errorf("unknown output format %q: use text, json or markdown", o.output)
	}
	if o.oldArg == "-" && o.newArg == "-" {
		return errors.New("OLD and NEW cannot both be stdin")
	}
	if err := o.config.Validate(); err != nil {
		return err
	}
	if o.allowEmpty {
		return nil
	}
	for _, side := range []struct {
		name, arg string
		crds      map[string]*apiextensionsv1.CustomResourceDefinition
	}{{"OLD", o.oldArg, o.oldCRDs}, {"NEW", o.newArg, o.newCRDs}} {
		// A cluster that holds none of NEW's CRDs yet is a first install, not a wrong file.
		firstInstall := side.name == "OLD" && o.oldArg == check.Cluster && len(o.newCRDs) > 0
		if len(side.crds) == 0 && !firstInstall {
			return fmt.Errorf("%s %s holds no CustomResourceDefinition (documents of other kinds are ignored): "+
				"give the file or directory of the release's CRDs, or --allow-empty if one side is empty on purpose", side.name, side.arg)
		}
	}
	return nil
}

// Run compares and prints; an unsafe change exits 1.
func (o *CheckOptions) Run() error {
	report := check.NewReport(check.Compare(o.oldCRDs, o.newCRDs, o.config))
	var err error
	switch o.output {
	case "json":
		err = printJSON(o.Out, report, &printers.JSONPrinter{})
	case "markdown":
		err = report.WriteMarkdown(o.Out)
	default:
		f, ok := o.Out.(*os.File)
		err = report.WriteText(o.Out, ok && term.IsTerminal(int(f.Fd())))
	}
	if err != nil {
		return err
	}
	if !report.Safe {
		return &exitError{code: ExitError, err: errors.New(report.Summary())}
	}
	return nil
}

func (o *CheckOptions) liveCRDs(ctx context.Context) ([]apiextensionsv1.CustomResourceDefinition, error) {
	cfg, err := restConfig(o.flags)
	if err != nil {
		return nil, err
	}
	c, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return listCRDs(ctx, c, true)
}
