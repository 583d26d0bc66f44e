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
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
)

// listPages times one paged LIST of every object at each N of -scale-ns and
// each page size of -list-page-sizes, -list-rounds times (the rounds
// interleaved), as the engine reads them (metadata only: the main pass and
// the catch-up sweep's fallback) and as the round-trip proof, verify and
// snapshots read them (whole objects). Up to etcd 3.6, and with etcd 3.7
// whenever a page stops before the end of the range, etcd counts the keys
// left in the range for every page it serves, so a pass of N objects in
// pages of P walks about N*N/(2P) index entries: this section shows what
// that costs at the N measured, and (from the API server's metrics) whether
// the API server read each page from etcd as a RangeStream
// (EtcdRangeStream, Kubernetes 1.37 with etcd 3.7) or as a unary Range.
//
// With -list-prove it then switches the storage version to v2 and runs
// `graduator prove` at each page size of -list-prove-page-sizes (time and
// peak RSS), and with -list-profile DIR `graduator migrate --prune` with a
// CPU profile written into DIR.
func (b *bench) listPages(ctx context.Context, cli string) error {
	meta, err := metadata.NewForConfig(b.cfg)
	if err != nil {
		return err
	}
	for _, n := range b.opts.scaleNs {
		if err := b.listPagesAt(ctx, meta, cli, n); err != nil {
			return err
		}
	}
	return nil
}

// listReader is one way of listing: its label and one page's LIST.
type listReader struct {
	what string
	list func(context.Context, metav1.ListOptions) (int, string, error)
}

func (b *bench) listPagesAt(ctx context.Context, meta metadata.Interface, cli string, n int) (err error) {
	fmt.Printf("\n-- N=%d --\n", n)
	b.groups++
	v1, err := b.widgetCRD(ctx, fmt.Sprintf("p%d.bench.graduator.io", b.groups))
	if err != nil {
		return err
	}
	defer func() {
		if dropErr := b.dropPopulation(ctx, v1); dropErr != nil && err == nil {
			err = dropErr
		}
	}()
	start := time.Now()
	notes := smallNotes
	if b.opts.listBytes > 0 {
		notes = strings.Repeat("x", b.opts.listBytes)
	}
	if err := b.createManyLike(ctx, v1, n, notes); err != nil {
		return err
	}
	fmt.Printf("%-42s %8.0f objects/s  (%s)\n", fmt.Sprintf("created at v1 (into etcd), spec.notes of %d bytes", len(notes)), rate(n, time.Since(start)), time.Since(start).Round(time.Millisecond))
	readers := []listReader{
		{"metadata", func(ctx context.Context, o metav1.ListOptions) (int, string, error) {
			l, err := meta.Resource(v1).List(ctx, o)
			if err != nil {
				return 0, "", err
			}
			return len(l.Items), l.Continue, nil
		}},
		{"whole objects", func(ctx context.Context, o metav1.ListOptions) (int, string, error) {
			l, err := b.dyn.Resource(v1).List(ctx, o)
			if err != nil {
				return 0, "", err
			}
			return len(l.Items), l.GetContinue(), nil
		}},
	}
	took := map[string][]time.Duration{}
	for round := 1; round <= b.opts.listRounds; round++ {
		for _, r := range readers {
			for _, size := range b.opts.listPageSizes {
				before, _ := b.etcdListRequests(ctx, v1.Resource)
				d, err := listAll(ctx, v1, n, size, r.list)
				if err != nil {
					return fmt.Errorf("list %s in pages of %d: %w", r.what, size, err)
				}
				after, _ := b.etcdListRequests(ctx, v1.Resource)
				key := fmt.Sprintf("LIST %s, pages of %d", r.what, size)
				took[key] = append(took[key], d)
				fmt.Printf("round %d: %-42s %8.0f objects/s  (%s; etcd requests: %s)\n", round, key, rate(n, d),
					d.Round(time.Millisecond), after.since(before))
			}
		}
	}
	fmt.Printf("\nmedian of %d rounds, N=%d:\n", b.opts.listRounds, n)
	for _, r := range readers {
		for _, size := range b.opts.listPageSizes {
			key := fmt.Sprintf("LIST %s, pages of %d", r.what, size)
			fmt.Printf("%-42s %8.0f objects/s  (median %s of %s)\n", key, rate(n, medianOf(took[key])),
				medianOf(took[key]).Round(time.Millisecond), roundedAll(took[key]))
		}
	}
	if !b.opts.listProve && b.opts.listProfile == "" {
		return nil
	}
	crdName := v1.Resource + "." + v1.Group
	if err := b.flip(ctx, crdName, "v2"); err != nil {
		return err
	}
	if b.opts.listProve {
		if err := b.proveAtPageSizes(ctx, cli, crdName, n); err != nil {
			return err
		}
	}
	if b.opts.listProfile != "" {
		return b.profiledMigrate(ctx, cli, crdName, n)
	}
	return nil
}

// proveAtPageSizes runs `graduator prove CRD --to v2` (the proof as
// `graduator migrate` makes it once the storage version is switched) at
// each page size of -list-prove-page-sizes, -list-rounds times interleaved,
// and prints its time and peak RSS.
func (b *bench) proveAtPageSizes(ctx context.Context, cli, crdName string, n int) error {
	for round := 1; round <= b.opts.listRounds; round++ {
		for _, size := range b.opts.listProvePageSizes {
			start := time.Now()
			hwm, anon, _, out, err := cliPeakRSS(ctx, cli, "prove", crdName, "--to", "v2", "--page-size", strconv.FormatInt(size, 10),
				"--kubeconfig", b.kubeconfig)
			if err != nil {
				return fmt.Errorf("graduator prove --page-size %d: %w: %s", size, err, out)
			}
			d := time.Since(start)
			fmt.Printf("round %d: %-42s %8.0f objects/s  (%s, peak RSS %.1f MiB, RssAnon %.1f MiB)\n", round,
				fmt.Sprintf("graduator prove, pages of %d", size), rate(n, d), d.Round(time.Millisecond), mib(hwm), mib(anon))
		}
	}
	return nil
}

// profiledMigrate runs `graduator migrate CRD --prune` (the proof on, as by
// default) with a CPU profile into -list-profile, and prints its phases.
func (b *bench) profiledMigrate(ctx context.Context, cli, crdName string, n int) error {
	if err := os.MkdirAll(b.opts.listProfile, 0o755); err != nil {
		return err
	}
	profile, err := filepath.Abs(filepath.Join(b.opts.listProfile, fmt.Sprintf("migrate-%d.pprof", n)))
	if err != nil {
		return err
	}
	if err := os.Setenv("GRADUATOR_CPUPROFILE", profile); err != nil {
		return err
	}
	defer func() { _ = os.Unsetenv("GRADUATOR_CPUPROFILE") }()
	// The API server's own profile over the run's first 30 s: the proof's
	// read at 300,000 objects (the API server serves /debug/pprof to an
	// admin by default).
	serverProfile := make(chan error, 1)
	go func() {
		serverProfile <- b.apiserverProfile(ctx, filepath.Join(filepath.Dir(profile), fmt.Sprintf("apiserver-%d.pprof", n)), 30*time.Second)
	}()
	start := time.Now()
	var progress bytes.Buffer
	hwm, _, _, out, err := cliPeakRSSTo(ctx, cli, &progress, "migrate", crdName, "--prune", "-o", "json",
		"--etcd-quota", strconv.Itoa(etcdQuota), "--kubeconfig", b.kubeconfig)
	if err != nil {
		return fmt.Errorf("graduator migrate: %w: %s%s", err, out, progress.Bytes()[max(0, progress.Len()-2000):])
	}
	d := time.Since(start)
	fmt.Printf("%-42s %8.0f objects/s  (%s, peak RSS %.1f MiB; CPU profile %s)\n", "graduator migrate --prune, v1->v2", rate(n, d),
		d.Round(time.Millisecond), mib(hwm), profile)
	fmt.Printf("  graduator said: %s", out)
	if parts, ok := cliPartsOf(progress.Bytes(), out); ok {
		fmt.Printf("  proof %.1fs, settle %.1fs, main pass %.0f objects/s, sweep %.1fs (by %s), prune %.1fs\n",
			parts.proof, parts.settle, parts.passRate, parts.sweep, parts.sweepBy, parts.prune)
	}
	return <-serverProfile
}

// apiserverProfile writes a CPU profile of the API server over the next d
// into path.
func (b *bench) apiserverProfile(ctx context.Context, path string, d time.Duration) error {
	cs, err := kubernetes.NewForConfig(b.cfg)
	if err != nil {
		return err
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(int(d.Seconds()))).Timeout(d + time.Minute).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("the API server's CPU profile: %w", err)
	}
	return os.WriteFile(path, raw, 0o644)
}

// etcdRequests counts the API server's etcd requests of one resource by
// operation (etcd_request_duration_seconds_count).
type etcdRequests map[string]float64

// since is what was counted after before, "list" and "listStream" only.
func (e etcdRequests) since(before etcdRequests) string {
	return fmt.Sprintf("list %.0f, listStream %.0f", e["list"]-before["list"], e["listStream"]-before["listStream"])
}

// etcdListRequests reads the API server's /metrics and counts its etcd
// requests for resource by operation.
func (b *bench) etcdListRequests(ctx context.Context, resource string) (etcdRequests, error) {
	cs, err := kubernetes.NewForConfig(b.cfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	counts := etcdRequests{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "etcd_request_duration_seconds_count{") || !strings.Contains(line, resource) {
			continue
		}
		_, after, ok := strings.Cut(line, `operation="`)
		if !ok {
			continue
		}
		op, _, _ := strings.Cut(after, `"`)
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err == nil {
			counts[op] += v
		}
	}
	return counts, sc.Err()
}

// medianOf is the median of ds (the mean of the middle two for an even
// count).
func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// roundedAll prints ds rounded to 0.1 s.
func roundedAll(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.Round(100 * time.Millisecond).String()
	}
	return strings.Join(parts, ", ")
}

// listAll pages through every object of gvr and checks it saw n.
func listAll(ctx context.Context, gvr schema.GroupVersionResource, n int, size int64,
	list func(context.Context, metav1.ListOptions) (int, string, error)) (time.Duration, error) {
	start := time.Now()
	seen, token := 0, ""
	for {
		got, next, err := list(ctx, metav1.ListOptions{Limit: size, Continue: token})
		if err != nil {
			return 0, err
		}
		seen += got
		if token = next; token == "" {
			break
		}
	}
	if seen != n {
		return 0, fmt.Errorf("listed %d widgets of %s, want %d", seen, gvr.Group, n)
	}
	return time.Since(start), nil
}
