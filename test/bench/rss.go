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
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graduator/graduator/migration"
	"github.com/graduator/graduator/test/envtestutil"
)

// rss runs the engine at its defaults in a child process on N and on
// rssFactor x N small objects, and on N and bigRSSFactor x N big ones, and
// reports the child's peak RSS (its own VmHWM; see childPeakRSS).
func (b *bench) rss(ctx context.Context) error {
	o := b.opts
	fmt.Printf("\n== engine peak RSS (child process, migration.Run at its defaults) ==\n")
	for _, set := range []struct {
		label  string
		notes  string
		factor int
	}{
		{"small", smallNotes, o.rssFactor},
		{"big (16 KB)", strings.Repeat("x", o.bigBytes), o.bigRSSFactor},
	} {
		var peaks []int64
		sizes := []int{o.n, o.n * set.factor}
		for _, size := range sizes {
			gvr, err := b.population(ctx, size, set.notes)
			if err != nil {
				return err
			}
			start := time.Now()
			peak, maxrss, err := childPeakRSS(ctx, b.kubeconfig, gvr.Group)
			if err != nil {
				return err
			}
			elapsed := time.Since(start)
			peaks = append(peaks, peak)
			fmt.Printf("peak RSS (VmHWM) migrating %7d %-11s objects: %6.1f MiB  (getrusage maxrss %.1f MiB; %.0f objects/s, %s)\n",
				size, set.label, mib(peak), mib(maxrss), float64(size)/elapsed.Seconds(), elapsed.Round(time.Millisecond))
			if err := b.drop(ctx, gvr.Group); err != nil {
				return err
			}
		}
		fmt.Printf("peak RSS ratio %dxN / N, %s objects: %.2f\n", set.factor, set.label, float64(peaks[1])/float64(peaks[0]))
	}
	return nil
}

func writeKubeconfig(env *envtestutil.Env) (string, error) {
	dir, err := os.MkdirTemp("", "graduator-bench-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := env.WriteKubeconfig(envtest.User{Name: "bench", Groups: []string{"system:masters"}}, path); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	return path, nil
}

// childPeakRSS runs the engine in a child process and returns its peak RSS
// in KiB: the VmHWM the child reads from /proc/self/status when it is done,
// and the maxrss getrusage reports for it. The two differ: Go starts
// children with vfork, and Linux carries the parent's peak RSS over into the
// child's maxrss at exec, so maxrss is at least the benchmark's own peak and
// says nothing of the child's: VmHWM is the figure to report. The child is
// killed if ctx ends first.
func childPeakRSS(ctx context.Context, kubeconfig, group string) (hwm, maxrss int64, err error) {
	self, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, self, "-child-kubeconfig", kubeconfig, "-child-group", group)
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("child: %w: %s", err, out.String())
	}
	usage, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, 0, fmt.Errorf("no rusage on this platform")
	}
	for line := range strings.Lines(out.String()) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), childHWMPrefix); ok {
			hwm, err = strconv.ParseInt(v, 10, 64)
			return hwm, usage.Maxrss, err
		}
	}
	return 0, 0, fmt.Errorf("the child reported no VmHWM: %q", out.String())
}

const childHWMPrefix = "child-vmhwm-kib="

// child migrates the widgets of group at v2 with the engine's defaults, as
// `graduator migrate` does, with no client-side rate limit.
func child(kubeconfig, group string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS = -1
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := engine(context.Background(), dyn, migration.Options{
		Resource: schema.GroupVersionResource{Group: group, Version: "v2", Resource: "widgets"}, Config: cfg,
	}); err != nil {
		return err
	}
	_, hwm, err := procStatus(os.Getpid())
	if err != nil {
		return err
	}
	fmt.Printf("%s%d\n", childHWMPrefix, hwm)
	return nil
}
