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
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/graduator/graduator/migration"
	"github.com/graduator/graduator/test/envtestutil"
)

const (
	foregroundWriters = 8
	foregroundObjects = 64
)

// polite measures a foreground client (8 writers, each merge-patching its
// own objects of another CRD in a loop) alone, then while the engine
// migrates N small objects at its defaults, then alone again.
func (b *bench) polite(ctx context.Context) error {
	n := b.opts.n
	fmt.Printf("\n== politeness: %d foreground writers (merge patches to another CRD) vs the engine at its defaults, N=%d ==\n",
		foregroundWriters, n)
	b.groups++
	fgGroup := fmt.Sprintf("fg%d.bench.graduator.io", b.groups)
	fg, err := b.widgetCRD(ctx, fgGroup)
	if err != nil {
		return err
	}
	defer func() { _ = b.drop(context.WithoutCancel(ctx), fgGroup) }()
	if err := envtestutil.CreateObjects(ctx, b.dyn, fg, foregroundObjects, foregroundWriters, func(i int) *unstructured.Unstructured {
		return envtestutil.Widget(fg, "default", fmt.Sprintf("fg-%03d", i), map[string]any{"color": "red", "size": int64(0), "notes": smallNotes})
	}); err != nil {
		return err
	}
	gvr, err := b.population(ctx, n, smallNotes)
	if err != nil {
		return err
	}

	solo := func(label string) (float64, error) {
		fctx, cancel := context.WithTimeout(ctx, b.opts.politeFor)
		defer cancel()
		start := time.Now()
		writes, err := foreground(fctx, b.dyn, fg)
		elapsed := time.Since(start)
		if err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			return 0, err
		}
		rate := float64(writes) / elapsed.Seconds()
		fmt.Printf("%-42s %8.0f writes/s   (%d writes in %s)\n", label, rate, writes, elapsed.Round(time.Millisecond))
		return rate, ctx.Err()
	}
	before, err := solo("foreground alone, before")
	if err != nil {
		return err
	}

	// The foreground runs exactly as long as the engine.
	fctx, cancel := context.WithCancel(ctx)
	var (
		writes int64
		fgErr  error
		done   = make(chan struct{})
	)
	start := time.Now()
	go func() {
		defer close(done)
		writes, fgErr = foreground(fctx, b.dyn, fg)
	}()
	var writers writerTrace
	engineErr := engine(ctx, b.dyn, migration.Options{Resource: gvr, Config: b.cfg, OnProgress: writers.record})
	elapsed := time.Since(start)
	cancel()
	<-done
	if engineErr != nil {
		return fmt.Errorf("engine: %w", engineErr)
	}
	if fgErr != nil && !errors.Is(fgErr, context.Canceled) {
		return fmt.Errorf("foreground: %w", fgErr)
	}
	during := float64(writes) / elapsed.Seconds()
	engineRate := float64(n) / elapsed.Seconds()
	fmt.Printf("%-42s %8.0f writes/s   (%d writes in %s)\n", "foreground while the engine migrates", during, writes, elapsed.Round(time.Millisecond))
	fmt.Printf("%-42s %8.0f objects/s  (%d objects in %s)\n", "engine (defaults) meanwhile", engineRate, n, elapsed.Round(time.Millisecond))
	fmt.Printf("  (adaptive writer limit over the run's pages: %s)\n", writers)
	if err := b.drop(ctx, gvr.Group); err != nil {
		return err
	}

	after, err := solo("foreground alone, after")
	if err != nil {
		return err
	}
	alone := (before + after) / 2
	fmt.Printf("foreground throughput kept while the engine migrates: %.0f%% of its mean rate alone (%.0f%% of before, %.0f%% of after)\n",
		100*during/alone, 100*during/before, 100*during/after)
	return nil
}

// foreground runs foregroundWriters writers, each merge-patching its own
// share of the objects of gvr in a loop until ctx is done, and returns the
// writes the API server acknowledged.
func foreground(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource) (int64, error) {
	var (
		writes atomic.Int64
		wg     sync.WaitGroup
		errs   = make(chan error, foregroundWriters)
	)
	for w := range foregroundWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				i := w + (k*foregroundWriters)%foregroundObjects
				patch := fmt.Appendf(nil, `{"spec":{"size":%d}}`, k)
				_, err := dyn.Resource(gvr).Namespace("default").
					Patch(ctx, fmt.Sprintf("fg-%03d", i), types.MergePatchType, patch, metav1.PatchOptions{})
				if ctx.Err() != nil {
					return // a write cut short by the end of the window
				}
				if err != nil {
					errs <- err
					return
				}
				writes.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return writes.Load(), err
	}
	return writes.Load(), ctx.Err()
}
