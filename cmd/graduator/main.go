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

// Command graduator is Graduator's CLI: the state of every CRD's versions,
// a one-shot storage migration without the operator, and a check of CRD
// changes for CI pipelines. On the PATH as
// kubectl-graduator it is also `kubectl graduator`.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func main() {
	// Ctrl-C stops a migration between two writes; its progress is printed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		os.Exit(exitCode(err))
	}
}

func newRootCommand() *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use:           "graduator",
		Short:         "Graduate CustomResourceDefinitions from one API version to the next",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(*cobra.Command, []string) {
			// controller-runtime helpers log through this; keep them quiet.
			ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
		},
	}
	flags.AddFlags(root.PersistentFlags())
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	root.AddCommand(newStatusCommand(flags, streams), newMigrateCommand(flags, streams), newVerifyCommand(flags, streams),
		newCheckCommand(flags, streams))
	return root
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

// exitError carries a specific exit code (1: an error, or an unsafe change
// for check; 2: the migration ran but some objects failed, or bad input for
// check).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

// badInput gives an error exit code 2 (bad input, for check and verify);
// an error that already carries a code keeps it.
func badInput(err error) error {
	var exit *exitError
	if err == nil || errors.As(err, &exit) {
		return err
	}
	return &exitError{code: 2, err: err}
}

func exitCode(err error) int {
	fmt.Fprintln(os.Stderr, "Error:", err)
	if e, ok := err.(*exitError); ok {
		return e.code
	}
	return 1
}
