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
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The manager runs two controllers (CRDVersionPolicy and the drift
// reporter); each logs this once its caches synced.
const (
	syncedLine         = "Starting workers"
	managerControllers = 2
)

// buildBinary builds a command of the module (the manager, the CLI) into a
// temporary directory and returns the binary's path.
func buildBinary(ctx context.Context, pkg string) (string, error) {
	dir, err := os.MkdirTemp("", "graduator-bench-manager-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	goTool := os.Getenv("GO")
	if goTool == "" {
		goTool = "go"
	}
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, pkg)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("go build %s: %w", pkg, err)
	}
	return bin, nil
}

// crds creates CRDs with a large schema, each in its own group, and
// measures the manager's RSS once its caches synced, at each count of
// opts.crdCounts (creating only as many as fit in opts.crdBudget).
func (b *bench) crds(ctx context.Context, manager string) error {
	o := b.opts
	sample := bigCRD(0, o.crdSchemaKB)
	data, err := json.Marshal(sample)
	if err != nil {
		return err
	}
	fmt.Printf("\n== manager RSS vs CRD count: CRDs of %d KiB each (one version, %d properties with descriptions), one group each ==\n",
		len(data)>>10, len(sample.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties))
	deadline := time.Now().Add(o.crdBudget)
	created := 0
	var rss []int64
	for _, want := range o.crdCounts {
		start := time.Now()
		got, err := b.createCRDs(ctx, created, want, deadline)
		if err != nil {
			return err
		}
		if got > created {
			fmt.Printf("created and served CRDs %d..%d in %s\n", created+1, got, time.Since(start).Round(time.Second))
		}
		if got < want {
			fmt.Printf("the %s budget for creating CRDs ran out: measuring %d CRDs instead of %d\n", o.crdBudget, got, want)
		}
		created = got
		res, err := measureManager(ctx, manager, b.kubeconfig, o.crdSettle)
		if err != nil {
			return err
		}
		rss = append(rss, res.rss)
		fmt.Printf("manager with %4d big CRDs: VmRSS %6.1f MiB, VmHWM %6.1f MiB  (caches synced %s after start, RSS flat for %s)\n",
			created, mib(res.rss), mib(res.hwm), res.synced.Round(100*time.Millisecond), o.crdSettle)
		fmt.Printf("    its heap after a forced GC: %.1f MiB live (HeapAlloc), %.1f MiB held (HeapSys), %.1f MiB of it returned to the OS\n",
			mib(res.heapAlloc>>10), mib(res.heapSys>>10), mib(res.heapReleased>>10))
		if got < want {
			break
		}
	}
	if len(rss) > 1 {
		fmt.Printf("manager VmRSS ratio %d CRDs / %d CRDs: %.2f\n", created, o.crdCounts[0], float64(rss[len(rss)-1])/float64(rss[0]))
	}
	return nil
}

// bigCRD is CRD number i: group c<i>.crds.bench.graduator.io, one version
// whose spec has enough string properties with descriptions for a schema of
// about schemaKB KiB.
func bigCRD(i, schemaKB int) *apiextensionsv1.CustomResourceDefinition {
	const desc = "This field is one of many in a deliberately large schema, as generated CRDs of big operators have: " +
		"each property carries a description of a couple of hundred bytes, copied from the Go doc comment of its field."
	prop := func(p int) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "string", Description: fmt.Sprintf("Field %d. %s", p, desc)}
	}
	one, _ := json.Marshal(map[string]apiextensionsv1.JSONSchemaProps{"field0000": prop(0)})
	props := map[string]apiextensionsv1.JSONSchemaProps{}
	for p := range max(1, (schemaKB<<10)/len(one)) {
		props[fmt.Sprintf("field%04d", p)] = prop(p)
	}
	group := fmt.Sprintf("c%04d.crds.bench.graduator.io", i)
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "bigs." + group, Labels: map[string]string{"bench": "crds"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "bigs", Singular: "big", Kind: "Big", ListKind: "BigList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:       "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", Properties: props}},
				}},
			}},
		},
	}
}

// createCRDs creates CRDs from..want-1 until the deadline, waits until the
// ones created are served, and returns how many exist.
func (b *bench) createCRDs(ctx context.Context, from, want int, deadline time.Time) (int, error) {
	const creators = 4
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
		done    = make([]bool, want)
	)
	next.Store(int64(from))
	for range creators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= want || time.Now().After(deadline) || ctx.Err() != nil {
					return
				}
				if err := b.c.Create(ctx, bigCRD(i, b.opts.crdSchemaKB)); err != nil {
					errOnce.Do(func() { first = fmt.Errorf("create CRD %d: %w", i, err) })
					return
				}
				done[i] = true
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return from, first
	}
	// A creator that took an index just before the deadline may have
	// created it after one that gave up on a lower index: fill such gaps.
	got := from
	for i := from; i < want; i++ {
		if done[i] {
			got = i + 1
		}
	}
	for i := from; i < got; i++ {
		if !done[i] {
			if err := b.c.Create(ctx, bigCRD(i, b.opts.crdSchemaKB)); err != nil {
				return from, fmt.Errorf("create CRD %d: %w", i, err)
			}
		}
	}
	// Served: every CRD answers a LIST (established and its handler
	// installed).
	for i := from; i < got; i++ {
		gvr := schema.GroupVersionResource{Group: fmt.Sprintf("c%04d.crds.bench.graduator.io", i), Version: "v1", Resource: "bigs"}
		for limit := time.Now().Add(2 * time.Minute); ; {
			if _, err := b.dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
				break
			} else if time.Now().After(limit) {
				return got, fmt.Errorf("CRD %d not served: %w", i, err)
			}
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return got, err
			}
		}
	}
	return got, nil
}

type managerRSS struct {
	rss, hwm int64 // KiB
	synced   time.Duration
	// heap is the runtime's own account after a forced GC, read from the
	// manager's pprof endpoint: what is live, and what the heap holds.
	heapAlloc, heapSys, heapReleased int64 // bytes
}

// measureManager starts the manager against the control plane, waits until
// its controllers' caches synced and its RSS stayed within 2% for settle,
// reads VmRSS and VmHWM from /proc, and stops it.
func measureManager(ctx context.Context, manager, kubeconfig string, settle time.Duration) (managerRSS, error) {
	var res managerRSS
	logFile, err := os.CreateTemp("", "graduator-bench-manager-*.log")
	if err != nil {
		return res, err
	}
	defer func() { _ = os.Remove(logFile.Name()) }()
	defer func() { _ = logFile.Close() }()
	mctx, cancel := context.WithCancel(ctx)
	pprofAddr, err := freeAddr()
	if err != nil {
		cancel()
		return res, err
	}
	cmd := exec.CommandContext(mctx, manager, "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--pprof-bind-address", pprofAddr)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second // then SIGKILL
	start := time.Now()
	if err := cmd.Start(); err != nil {
		cancel()
		return res, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cancel()
		<-exited
	}()
	logTail := func() string {
		data, _ := os.ReadFile(logFile.Name())
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		return string(data)
	}

	type sample struct {
		at  time.Time
		rss int64
	}
	var samples []sample
	var synced time.Time
	for limit := start.Add(5 * time.Minute); ; {
		select {
		case err := <-exited:
			exited <- err
			return res, fmt.Errorf("the manager exited (%v); its log ends:\n%s", err, logTail())
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(time.Second):
		}
		now := time.Now()
		if now.After(limit) {
			return res, fmt.Errorf("the manager did not settle in 5 minutes (synced: %v); its log ends:\n%s", !synced.IsZero(), logTail())
		}
		if synced.IsZero() {
			data, _ := os.ReadFile(logFile.Name())
			if bytes.Count(data, []byte(syncedLine)) < managerControllers {
				continue
			}
			synced, res.synced = now, now.Sub(start)
		}
		rss, hwm, err := procStatus(cmd.Process.Pid)
		if err != nil {
			return res, err
		}
		res.rss, res.hwm = rss, hwm
		samples = append(samples, sample{now, rss})
		if now.Sub(synced) < settle {
			continue
		}
		lo, hi := rss, rss
		for k := len(samples) - 1; k >= 0 && now.Sub(samples[k].at) <= settle; k-- {
			lo, hi = min(lo, samples[k].rss), max(hi, samples[k].rss)
		}
		if float64(hi-lo) <= 0.02*float64(hi) {
			if dir := os.Getenv("BENCH_HEAP_PROFILE_DIR"); dir != "" {
				saveProfile(ctx, pprofAddr, filepath.Join(dir, fmt.Sprintf("heap-%d.pb.gz", time.Now().Unix())))
			}
			return res, res.readHeap(ctx, pprofAddr)
		}
	}
}

// readHeap reads the heap's figures from the header of the manager's heap
// profile, after the endpoint forced a GC (gc=1): HeapAlloc is then about what
// is live.
func (res *managerRSS) readHeap(ctx context.Context, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/heap?gc=1&debug=1", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("read the manager's heap profile: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	fields := map[string]*int64{"HeapAlloc": &res.heapAlloc, "HeapSys": &res.heapSys, "HeapReleased": &res.heapReleased}
	scanner := bufio.NewScanner(resp.Body)
	scanner.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for scanner.Scan() {
		// Lines such as "# HeapAlloc = 12345".
		key, value, ok := strings.Cut(strings.TrimPrefix(scanner.Text(), "# "), " = ")
		if target, wanted := fields[key]; ok && wanted {
			if *target, err = strconv.ParseInt(value, 10, 64); err != nil {
				return fmt.Errorf("heap profile line %q: %w", scanner.Text(), err)
			}
		}
	}
	return scanner.Err()
}

// saveProfile keeps the manager's heap profile for `go tool pprof`
// (BENCH_HEAP_PROFILE_DIR); a failure only loses the profile.
func saveProfile(ctx context.Context, addr, path string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/heap", nil)
	if err != nil {
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err == nil {
		_ = os.WriteFile(path, data, 0o644)
	}
}

// freeAddr is a loopback address with a port free right now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

// procStatus reads VmRSS and VmHWM (KiB) of a process.
func procStatus(pid int) (rss, hwm int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		key, value, ok := strings.Cut(s.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parse %s %q: %w", key, value, err)
		}
		if key == "VmRSS" {
			rss = kib
		} else {
			hwm = kib
		}
	}
	if rss == 0 || hwm == 0 {
		return 0, 0, fmt.Errorf("no VmRSS or VmHWM in /proc/%d/status", pid)
	}
	return rss, hwm, s.Err()
}
