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
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// snapshot measures the CLI's peak RSS while `graduator verify` writes a
// snapshot of snapshotN small objects and then compares the cluster with
// it: both must stream, not hold the objects. The CLI is built with `go
// build` and runs as a child; its VmHWM is sampled from /proc/<pid>/status
// every snapshotSampleEvery until it exits (the last sample is the figure:
// VmHWM only grows, and the child's getrusage maxrss starts at the
// benchmark's own peak, see childPeakRSS).
func (b *bench) snapshot(ctx context.Context, cli string) error {
	n := b.opts.snapshotN
	fmt.Printf("\n== CLI peak RSS: graduator verify --snapshot / --against on %d small objects ==\n", n)
	gvr, err := b.population(ctx, n, smallNotes)
	if err != nil {
		return err
	}
	defer func() { _ = b.drop(context.WithoutCancel(ctx), gvr.Group) }()
	dir, err := os.MkdirTemp("", "graduator-bench-snapshot-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	file := filepath.Join(dir, "before.json.gz")
	crd := "widgets." + gvr.Group
	for _, step := range []struct {
		label string
		args  []string
	}{
		{"verify --snapshot (write)", []string{"verify", crd, "--snapshot", file}},
		{"verify --against (compare)", []string{"verify", crd, "--against", file}},
	} {
		start := time.Now()
		hwm, anon, maxrss, out, err := cliPeakRSS(ctx, cli, append(step.args, "--kubeconfig", b.kubeconfig)...)
		if err != nil {
			return fmt.Errorf("%s: %w: %s", step.label, err, out)
		}
		elapsed := time.Since(start)
		fmt.Printf("peak RSS (VmHWM) %-27s %d objects: %6.1f MiB  (of which anonymous, peak RssAnon: %.1f MiB; getrusage maxrss %.1f MiB; %.0f objects/s, %s)\n",
			step.label, n, mib(hwm), mib(anon), mib(maxrss), float64(n)/elapsed.Seconds(), elapsed.Round(time.Millisecond))
		fmt.Printf("  graduator said: %s", out)
	}
	info, err := os.Stat(file)
	if err != nil {
		return err
	}
	fmt.Printf("snapshot file: %.1f MiB for %d objects (%.0f bytes an object, gzip)\n", float64(info.Size())/(1<<20), n,
		float64(info.Size())/float64(n))
	return nil
}

// snapshotSampleEvery is how often the CLI's VmHWM is read.
const snapshotSampleEvery = 10 * time.Millisecond

// cliPeakRSS runs the CLI and returns its peak RSS in KiB (the last VmHWM
// sampled before it exited), the peak of its anonymous RSS (RssAnon: the
// heap and stacks, without the pages of the binary itself), its getrusage
// maxrss, and its stdout.
func cliPeakRSS(ctx context.Context, cli string, args ...string) (hwm, anon, maxrss int64, out []byte, err error) {
	return cliPeakRSSTo(ctx, cli, os.Stderr, args...)
}

// cliPeakRSSTo is cliPeakRSS with the CLI's stderr (its progress) sent to
// stderr.
func cliPeakRSSTo(ctx context.Context, cli string, stderr io.Writer, args ...string) (hwm, anon, maxrss int64, out []byte, err error) {
	cmd := exec.CommandContext(ctx, cli, args...)
	stdout, err := os.CreateTemp("", "graduator-bench-cli-out-")
	if err != nil {
		return 0, 0, 0, nil, err
	}
	defer func() { _ = os.Remove(stdout.Name()); _ = stdout.Close() }()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(snapshotSampleEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			out, _ = os.ReadFile(stdout.Name())
			if err != nil {
				return hwm, anon, 0, out, err
			}
			if usage, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				maxrss = usage.Maxrss
			}
			if hwm == 0 {
				return 0, 0, maxrss, out, fmt.Errorf("the CLI exited before its VmHWM could be read")
			}
			return hwm, anon, maxrss, out, nil
		case <-tick.C:
			// Between the exit and the reap /proc has no VmHWM: keep the
			// last sample.
			if _, h, err := procStatus(cmd.Process.Pid); err == nil {
				hwm = max(hwm, h)
			}
			if a, err := rssAnon(cmd.Process.Pid); err == nil {
				anon = max(anon, a)
			}
		}
	}
}

// rssAnon reads RssAnon (KiB) of a process.
func rssAnon(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no RssAnon in /proc/%d/status", pid)
}
