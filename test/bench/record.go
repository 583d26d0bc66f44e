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
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/graduator/graduator/test/figures"
)

// blockName is the block of the document (-docs) a section's report is
// written into: one a section, the scale section's two runs of `make
// bench-scale` (the API server's watch cache on and off) apart.
func (b *bench) blockName(section string) string {
	name := "BENCH " + strings.ToUpper(section)
	if section == "scale" && !b.opts.watchCache {
		name += " UNCACHED"
	}
	return name
}

// recorded runs a section, its report printed as it goes, and, with
// -docs, writes the report between the section's markers in that
// document, under a stamp of this run. A section that fails writes
// nothing: the document keeps its last complete report.
func (b *bench) recorded(ctx context.Context, section string, run func(context.Context) error) error {
	if b.opts.docs == "" {
		return run(ctx)
	}
	stamp := figures.NewStamp(b.opts.command)
	report, err := teeStdout(func() error { return run(ctx) })
	if err != nil {
		return err
	}
	table := "```\n" + strings.TrimSpace(report) + "\n```"
	if err := figures.Write(b.opts.docs, b.blockName(section), stamp, table); err != nil {
		return err
	}
	fmt.Printf("(section %s written to %s)\n", section, b.opts.docs)
	return nil
}

// teeStdout runs f with os.Stdout copied into the returned text as it is
// printed.
func teeStdout(f func() error) (string, error) {
	real := os.Stdout
	r, w, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("capture the report: %w", err)
	}
	var captured bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(io.MultiWriter(real, &captured), r)
	}()
	os.Stdout = w
	runErr := f()
	os.Stdout = real
	_ = w.Close()
	<-done
	_ = r.Close()
	return captured.String(), runErr
}
