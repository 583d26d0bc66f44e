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

// Package cli is Graduator's command line, `graduator` (also `kubectl
// graduator`): the state of every CRD's versions (status), a one-shot
// storage migration without the operator (migrate), a proof that it kept
// every object's content (verify), and a check of CRD changes for CI
// (check).
//
// Each command is in kubectl's plugin shape: NewXOptions(flags, streams)
// builds its options, NewCmdX wires them to flags, and RunE calls
// Complete (read arguments, build clients), Validate (refuse bad input
// before anything is written) and Run, in that order. Output goes to the
// IOStreams given, so a test or another binary can run a command in
// process. The commands share one package because they share its
// helpers: the kubeconfig, exit codes, the difference printer of verify
// and migrate --verify.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// NewRootCommand is `graduator` with every command, writing to streams.
// Its errors carry their exit code: see ExitCode.
func NewRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	var verbosity int
	root := &cobra.Command{
		Use:           "graduator",
		Short:         "Graduate CustomResourceDefinitions from one API version to the next",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return setUpLogs(streams.ErrOut, verbosity)
		},
	}
	flags.AddFlags(root.PersistentFlags())
	root.PersistentFlags().IntVarP(&verbosity, "v", "v", 0,
		"Log level of the Kubernetes client libraries (klog) on stderr: 0 shows none of their lines, 4 and up show requests.")
	root.AddCommand(NewCmdStatus(flags, streams), NewCmdMigrate(flags, streams), NewCmdVerify(flags, streams),
		NewCmdCheck(flags, streams), NewCmdScan(flags, streams), NewCmdPrepare(flags, streams))
	root.AddCommand(NewCmdProve(flags, streams))
	// A bad flag is a usage error in every command, with the same exit code.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	for _, cmd := range root.Commands() {
		if cmd.Args != nil {
			args := cmd.Args
			cmd.Args = func(cmd *cobra.Command, a []string) error { return usageError(args(cmd, a)) }
		}
	}
	return root
}

// setUpLogs keeps client-go's klog lines (such as "Unexpected error when
// reading response body" before an error the CLI reports itself) off the
// screen unless -v asks for them, and sends controller-runtime's errors to
// errOut.
func setUpLogs(errOut io.Writer, verbosity int) error {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	settings := map[string]string{"v": fmt.Sprint(verbosity), "logtostderr": "true"}
	if verbosity <= 0 {
		// Every line to a discarded writer, none to stderr.
		settings = map[string]string{"v": "0", "logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL"}
		klog.SetOutput(io.Discard)
	}
	for name, value := range settings {
		if err := fs.Set(name, value); err != nil {
			return err
		}
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(errOut), zap.Level(zapcore.ErrorLevel)))
	return nil
}

// restConfig loads the kubeconfig. Client-side rate limiting is off: the
// migration has its own token bucket (--qps), and API Priority and Fairness
// protects the server.
func restConfig(flags *genericclioptions.ConfigFlags) (*rest.Config, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS = -1
	cfg.UserAgent = "graduator"
	return cfg, nil
}

// Exit codes. One rule for every command: a usage error (an unknown flag,
// a bad flag value, a wrong number of arguments) exits ExitUsage, as
// kubectl does. verify and check exit ExitBadInput on any bad input, usage
// errors included, as documented (kubectl diff's convention); migrate exits
// ExitBadInput when some objects could not be rewritten. prepare --dry-run
// --exit-code exits ExitPlanned when some cluster has work planned (git diff
// --exit-code's convention: a CI gate that wants "nothing to do").
const (
	ExitError    = 1
	ExitUsage    = 1
	ExitBadInput = 2
	ExitPlanned  = 3
)

// exitError carries a specific exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usage marks a usage error; commands whose bad input exits 2 turn it into
// that code (see badInput).
type usage struct{ error }

func (u usage) Unwrap() error { return u.error }

func usageError(err error) error {
	if err == nil {
		return nil
	}
	var exit *exitError
	if errors.As(err, &exit) {
		return err
	}
	return usage{err}
}

// badInput gives an error exit code 2 (bad input, for check and verify);
// an error that already carries a code keeps it.
func badInput(err error) error {
	var exit *exitError
	if err == nil || errors.As(err, &exit) {
		return err
	}
	return &exitError{code: ExitBadInput, err: err}
}

// noArgs refuses positional arguments as bad input (exit 2), where
// cobra.NoArgs would exit 1, the code of a finding.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return badInput(fmt.Errorf("%s takes no arguments, got %q", cmd.CommandPath(), args))
	}
	return nil
}

// ExitCode is the exit code of an error NewRootCommand returned.
func ExitCode(err error) int {
	var exit *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.code
	case errors.As(err, &usage{}):
		return ExitUsage
	}
	return ExitError
}
