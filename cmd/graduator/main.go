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

// Command graduator is Graduator's CLI (package cli); on the PATH as
// kubectl-graduator it is also `kubectl graduator`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/graduator/graduator/internal/cli"
)

// cpuProfileEnv names a file the CLI writes a CPU profile of its whole run
// to, for `go tool pprof` (the benchmarks' profile of the round-trip
// proof's read, docs/benchmarks.md). Not a flag: no user needs it.
const cpuProfileEnv = "GRADUATOR_CPUPROFILE"

func main() {
	stopProfile, err := startCPUProfile(os.Getenv(cpuProfileEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(2)
	}
	// Ctrl-C stops a migration between two writes; its progress is printed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = cli.NewRootCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}).ExecuteContext(ctx)
	stop()
	stopProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(cli.ExitCode(err))
	}
}

// startCPUProfile starts a CPU profile into path, when path is not empty,
// and returns what stops it and closes the file.
func startCPUProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
