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
	"slices"
	"strings"
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
// migrates N small objects at its defaults, then alone again, once a round;
// then an open-loop foreground (a fixed rate of writes) alone and during a
// migration.
func (b *bench) polite(ctx context.Context) error {
	n := b.opts.n
	fmt.Printf("\n== politeness: %d foreground writers (merge patches to another CRD) vs the engine at its defaults, N=%d, %d rounds ==\n",
		foregroundWriters, n, b.opts.rounds)
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

	solo := func(label string, lat *latencies) (float64, error) {
		fctx, cancel := context.WithTimeout(ctx, b.opts.politeFor)
		defer cancel()
		start := time.Now()
		writes, err := foreground(fctx, b.dyn, fg, lat, nil)
		elapsed := time.Since(start)
		if err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			return 0, err
		}
		rate := float64(writes) / elapsed.Seconds()
		fmt.Printf("%-42s %8.0f writes/s   (%d writes in %s)\n", label, rate, writes, elapsed.Round(time.Millisecond))
		return rate, ctx.Err()
	}
	var (
		kept           []float64
		settled        []int
		alone, sharing latencies
	)
	for round := range b.opts.rounds {
		fmt.Printf("-- round %d --\n", round+1)
		gvr, err := b.population(ctx, n, smallNotes)
		if err != nil {
			return err
		}
		before, err := solo("foreground alone, before", &alone)
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
		t := newTrace(migration.InitialLimit)
		fgWrites := newCounter(t.start)
		go func() {
			defer close(done)
			writes, fgErr = foreground(fctx, b.dyn, fg, &sharing, fgWrites)
		}()
		engineErr := engine(ctx, b.dyn, t.options(migration.Options{Resource: gvr, Config: b.cfg}))
		t.done()
		elapsed := time.Since(t.start)
		cancel()
		<-done
		if engineErr != nil {
			return fmt.Errorf("engine: %w", engineErr)
		}
		if fgErr != nil && !errors.Is(fgErr, context.Canceled) {
			return fmt.Errorf("foreground: %w", fgErr)
		}
		during := float64(writes) / elapsed.Seconds()
		fmt.Printf("%-42s %8.0f writes/s   (%d writes in %s)\n", "foreground while the engine migrates", during, writes, elapsed.Round(time.Millisecond))
		fmt.Printf("%-42s %8.0f objects/s  (%d objects in %s)\n", "engine (defaults) meanwhile", float64(n)/elapsed.Seconds(), n, elapsed.Round(time.Millisecond))
		fmt.Printf("  (adaptive writer limit: %s)\n", t)
		fmt.Printf("  (the engine's share of the writes meanwhile: %.0f%%)\n", 100*float64(n)/(float64(n)+float64(writes)))
		settled = append(settled, t.settled())
		if err := b.drop(ctx, gvr.Group); err != nil {
			return err
		}
		after, err := solo("foreground alone, after", &alone)
		if err != nil {
			return err
		}
		k := during / ((before + after) / 2)
		kept = append(kept, k)
		fmt.Printf("foreground throughput kept while the engine migrates: %.0f%% of its mean rate alone (%.0f%% of before, %.0f%% of after)\n",
			100*k, 100*during/before, 100*during/after)
		if round == 0 {
			if err := b.timelinePlots("polite", "The engine at its defaults beside an 8-writer foreground", t, fgWrites); err != nil {
				return err
			}
		}
	}
	fmt.Printf("foreground kept, each round: %s (least %.0f%%)\n", percents(kept), 100*slices.Min(kept))
	fmt.Printf("engine beside the foreground, where the limit settled each round: %v (max/min %.2f)\n", settled, spread(settled))
	fmt.Printf("foreground write latency alone: %s; while the engine migrates: %s\n", &alone, &sharing)
	return b.openLoop(ctx, fg)
}

// openLoopRate is the open-loop foreground's writes per second.
const openLoopRate = 100

// openLoop sends openLoopRate writes a second to fg, whatever their
// latency (as a controller reacting to events does), alone and then while
// the engine migrates N small objects, and reports their latency.
func (b *bench) openLoop(ctx context.Context, fg schema.GroupVersionResource) error {
	fmt.Printf("\n== an open-loop foreground: %d writes/s, alone and while the engine migrates ==\n", openLoopRate)
	var alone, sharing latencies
	fctx, cancel := context.WithTimeout(ctx, b.opts.politeFor)
	sent, err := paced(fctx, b.dyn, fg, &alone)
	cancel()
	if err != nil {
		return err
	}
	fmt.Printf("alone: %d writes over %s; latency %s\n", sent, b.opts.politeFor, &alone)
	gvr, err := b.population(ctx, b.opts.n, smallNotes)
	if err != nil {
		return err
	}
	fctx, cancel = context.WithCancel(ctx)
	var (
		fgSent int
		fgErr  error
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		fgSent, fgErr = paced(fctx, b.dyn, fg, &sharing)
	}()
	start := time.Now()
	engineErr := engine(ctx, b.dyn, migration.Options{Resource: gvr, Config: b.cfg})
	elapsed := time.Since(start)
	cancel()
	<-done
	if engineErr != nil {
		return fmt.Errorf("engine: %w", engineErr)
	}
	if fgErr != nil {
		return fmt.Errorf("open-loop foreground: %w", fgErr)
	}
	fmt.Printf("while the engine migrates (%.0f objects/s): %d writes over %s; latency %s\n",
		float64(b.opts.n)/elapsed.Seconds(), fgSent, elapsed.Round(time.Millisecond), &sharing)
	return b.drop(ctx, gvr.Group)
}

// paced sends openLoopRate writes a second to the foreground objects until
// ctx is done, each in its own goroutine, and waits for them.
func paced(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, lat *latencies) (int, error) {
	tick := time.NewTicker(time.Second / openLoopRate)
	defer tick.Stop()
	var (
		wg   sync.WaitGroup
		errs = make(chan error, 1)
		sent int
	)
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			select {
			case err := <-errs:
				return sent, err
			default:
				return sent, nil
			}
		case <-tick.C:
		}
		sent++
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			patch := fmt.Appendf(nil, `{"spec":{"size":%d}}`, k)
			start := time.Now()
			// Not cut short by ctx: a write sent is waited for, so its
			// latency counts however long it took.
			_, err := dyn.Resource(gvr).Namespace("default").
				Patch(context.WithoutCancel(ctx), fmt.Sprintf("fg-%03d", k%foregroundObjects), types.MergePatchType, patch, metav1.PatchOptions{})
			if err != nil {
				select {
				case errs <- err:
				default:
				}
				return
			}
			lat.add(time.Since(start))
		}(sent)
	}
}

// latencies collects write latencies.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.d = append(l.d, d)
}

// quantile is the q-quantile of the latencies collected.
func (l *latencies) quantile(q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	sorted := slices.Sorted(slices.Values(l.d))
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func (l *latencies) String() string {
	return fmt.Sprintf("p50 %s, p99 %s", l.quantile(0.5).Round(100*time.Microsecond), l.quantile(0.99).Round(100*time.Microsecond))
}

func percents(fs []float64) string {
	var parts []string
	for _, f := range fs {
		parts = append(parts, fmt.Sprintf("%.0f%%", 100*f))
	}
	return strings.Join(parts, ", ")
}

// foreground runs foregroundWriters writers, each merge-patching its own
// share of the objects of gvr in a loop until ctx is done, and returns the
// writes the API server acknowledged, recording each one's latency (and
// counting it in c, when set).
func foreground(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, lat *latencies, c *counter) (int64, error) {
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
				start := time.Now()
				_, err := dyn.Resource(gvr).Namespace("default").
					Patch(ctx, fmt.Sprintf("fg-%03d", i), types.MergePatchType, patch, metav1.PatchOptions{})
				if ctx.Err() != nil {
					return // a write cut short by the end of the window
				}
				if err != nil {
					errs <- err
					return
				}
				lat.add(time.Since(start))
				if c != nil {
					c.add()
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
