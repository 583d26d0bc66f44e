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

// foregroundObjects is how many objects of its own CRD the foreground
// writes.
const foregroundObjects = 64

// foregroundSizes are the closed-loop foregrounds measured, the first (8
// writers) the one the targets and the plots are about.
var foregroundSizes = []int{8, 1, 32}

// polite measures, each round: the engine at its defaults on an idle server
// (its rate, the share of the run it spent pausing); for each of
// foregroundSizes, a closed-loop foreground client (writers merge-patching
// their own objects of another CRD in a loop) alone, while the engine
// migrates N small objects at its defaults, and alone again; then a client
// paced at openLoopRate writes a second, alone and during a migration.
// Every ratio is taken within its round; the summary gives the median and
// range over the rounds.
func (b *bench) polite(ctx context.Context) error {
	n := b.opts.n
	fmt.Printf("\n== politeness: closed-loop foregrounds of %v writers and a client paced at %d writes/s (merge patches to another CRD) vs the engine at its defaults, N=%d, %d rounds ==\n",
		foregroundSizes, openLoopRate, n, b.opts.rounds)
	b.groups++
	fgGroup := fmt.Sprintf("fg%d.bench.graduator.io", b.groups)
	fg, err := b.widgetCRD(ctx, fgGroup)
	if err != nil {
		return err
	}
	defer func() { _ = b.drop(context.WithoutCancel(ctx), fgGroup) }()
	if err := envtestutil.CreateObjects(ctx, b.dyn, fg, foregroundObjects, 8, func(i int) *unstructured.Unstructured {
		return envtestutil.Widget(fg, "default", fmt.Sprintf("fg-%03d", i), map[string]any{"color": "red", "size": int64(0), "notes": smallNotes})
	}); err != nil {
		return err
	}
	var (
		idlePaused              []float64
		kept                    = map[int][]float64{}
		beside                  = map[int][]float64{}
		pacedKept, pacedP99     []float64
		pacedEngine             []float64
		alone8, sharing8        latencies
		pacedAlone, pacedDuring latencies
	)
	for round := range b.opts.rounds {
		fmt.Printf("-- round %d --\n", round+1)
		idle, share, err := b.politeIdle(ctx)
		if err != nil {
			return err
		}
		idlePaused = append(idlePaused, share)
		for _, writers := range foregroundSizes {
			alone, sharing := &latencies{}, &latencies{}
			if writers == 8 {
				alone, sharing = &alone8, &sharing8
			}
			k, engineRate, err := b.besideClosedLoop(ctx, fg, writers, round, alone, sharing)
			if err != nil {
				return err
			}
			kept[writers] = append(kept[writers], k)
			beside[writers] = append(beside[writers], engineRate/idle)
		}
		rateKept, p99, engineRate, err := b.besidePaced(ctx, fg, &pacedAlone, &pacedDuring)
		if err != nil {
			return err
		}
		pacedKept = append(pacedKept, rateKept)
		pacedEngine = append(pacedEngine, engineRate/idle)
		pacedP99 = append(pacedP99, p99)
	}
	fmt.Printf("\n-- politeness, %d rounds (each ratio within its round) --\n", b.opts.rounds)
	fmt.Printf("idle, the share of the run spent pausing: %s; %s\n", percents(idlePaused), median(idlePaused))
	for _, writers := range foregroundSizes {
		fmt.Printf("%2d-writer closed-loop foreground kept: %s; %s (least %.0f%%); the engine beside it at %s of its idle rate\n",
			writers, percents(kept[writers]), median(kept[writers]), 100*slices.Min(kept[writers]), median(beside[writers]))
	}
	fmt.Printf("8-writer foreground write latency alone: %s; while the engine migrates: %s\n", &alone8, &sharing8)
	fmt.Printf("paced client (%d writes/s) kept: %s; %s; p99 during / alone, each round: %s; the engine beside it at %s of its idle rate\n",
		openLoopRate, percents(pacedKept), median(pacedKept), ratios(pacedP99), median(pacedEngine))
	fmt.Printf("paced client latency alone: %s; while the engine migrates: %s\n", &pacedAlone, &pacedDuring)
	return nil
}

// politeIdle migrates N small objects at the defaults on an otherwise idle
// server: the engine's idle rate, and the share of the run spent pausing.
func (b *bench) politeIdle(ctx context.Context) (float64, float64, error) {
	gvr, err := b.population(ctx, b.opts.n, smallNotes)
	if err != nil {
		return 0, 0, err
	}
	t := newTrace(migration.InitialLimit)
	if err := engine(ctx, b.dyn, t.options(migration.Options{Resource: gvr, Config: b.cfg})); err != nil {
		return 0, 0, fmt.Errorf("engine: %w", err)
	}
	t.done()
	rate := float64(b.opts.n) / t.end.Seconds()
	share, pauses := t.paused()
	fmt.Printf("%-42s %8.0f objects/s  (%s; %d pauses, %.1f%% of the run)\n", "engine (defaults), idle", rate, t, pauses, 100*share)
	return rate, share, b.drop(ctx, gvr.Group)
}

// besideClosedLoop runs a closed-loop foreground of writers alone, while
// the engine migrates N small objects at its defaults, and alone again: the
// share of its rate alone it kept, and the engine's rate.
func (b *bench) besideClosedLoop(ctx context.Context, fg schema.GroupVersionResource, writers, round int, alone, sharing *latencies) (float64, float64, error) {
	solo := func(label string) (float64, error) {
		fctx, cancel := context.WithTimeout(ctx, b.opts.politeFor)
		defer cancel()
		start := time.Now()
		writes, err := foreground(fctx, b.dyn, fg, writers, alone, nil)
		elapsed := time.Since(start)
		if err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			return 0, err
		}
		rate := float64(writes) / elapsed.Seconds()
		fmt.Printf("%-42s %8.0f writes/s   (%d writes in %s)\n", label, rate, writes, elapsed.Round(time.Millisecond))
		return rate, ctx.Err()
	}
	gvr, err := b.population(ctx, b.opts.n, smallNotes)
	if err != nil {
		return 0, 0, err
	}
	before, err := solo(fmt.Sprintf("%d-writer foreground alone, before", writers))
	if err != nil {
		return 0, 0, err
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
		writes, fgErr = foreground(fctx, b.dyn, fg, writers, sharing, fgWrites)
	}()
	engineErr := engine(ctx, b.dyn, t.options(migration.Options{Resource: gvr, Config: b.cfg}))
	t.done()
	elapsed := time.Since(t.start)
	cancel()
	<-done
	if engineErr != nil {
		return 0, 0, fmt.Errorf("engine: %w", engineErr)
	}
	if fgErr != nil && !errors.Is(fgErr, context.Canceled) {
		return 0, 0, fmt.Errorf("foreground: %w", fgErr)
	}
	during := float64(writes) / elapsed.Seconds()
	engineRate := float64(b.opts.n) / elapsed.Seconds()
	share, pauses := t.paused()
	fmt.Printf("%-42s %8.0f writes/s   (%d writes in %s)\n", fmt.Sprintf("%d-writer foreground during", writers), during, writes, elapsed.Round(time.Millisecond))
	fmt.Printf("%-42s %8.0f objects/s  (%s; %d pauses, %.1f%% of the run)\n", "engine (defaults) meanwhile", engineRate, t, pauses, 100*share)
	if err := b.drop(ctx, gvr.Group); err != nil {
		return 0, 0, err
	}
	after, err := solo(fmt.Sprintf("%d-writer foreground alone, after", writers))
	if err != nil {
		return 0, 0, err
	}
	k := during / ((before + after) / 2)
	fmt.Printf("%d-writer foreground kept: %.0f%% of its mean rate alone (%.0f%% of before, %.0f%% of after)\n",
		writers, 100*k, 100*during/before, 100*during/after)
	if round == 0 && writers == foregroundSizes[0] {
		if err := b.timelinePlots("polite", fmt.Sprintf("The engine at its defaults beside a %d-writer foreground", writers), t, fgWrites); err != nil {
			return 0, 0, err
		}
	}
	return k, engineRate, nil
}

// openLoopRate is the paced client's writes per second.
const openLoopRate = 100

// besidePaced sends openLoopRate writes a second to fg, whatever their
// latency (as a controller reacting to events does), alone and then while
// the engine migrates N small objects: the share of its rate it kept, its
// p99 latency during against alone, and the engine's rate. Its latencies
// are added to alone and sharing.
func (b *bench) besidePaced(ctx context.Context, fg schema.GroupVersionResource, alone, sharing *latencies) (float64, float64, float64, error) {
	fctx, cancel := context.WithTimeout(ctx, b.opts.politeFor)
	solo := &latencies{}
	sent, err := paced(fctx, b.dyn, fg, solo)
	cancel()
	if err != nil {
		return 0, 0, 0, err
	}
	for _, d := range solo.d {
		alone.add(d)
	}
	fmt.Printf("paced client alone: %d writes over %s\n", sent, b.opts.politeFor)
	gvr, err := b.population(ctx, b.opts.n, smallNotes)
	if err != nil {
		return 0, 0, 0, err
	}
	fctx, cancel = context.WithCancel(ctx)
	var (
		during = &latencies{}
		fgErr  error
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		_, fgErr = paced(fctx, b.dyn, fg, during)
	}()
	t := newTrace(migration.InitialLimit)
	engineErr := engine(ctx, b.dyn, t.options(migration.Options{Resource: gvr, Config: b.cfg}))
	t.done()
	elapsed := time.Since(t.start)
	cancel()
	<-done
	if engineErr != nil {
		return 0, 0, 0, fmt.Errorf("engine: %w", engineErr)
	}
	if fgErr != nil {
		return 0, 0, 0, fmt.Errorf("paced client: %w", fgErr)
	}
	for _, d := range during.d {
		sharing.add(d)
	}
	acked := float64(len(during.d)) / elapsed.Seconds()
	engineRate := float64(b.opts.n) / elapsed.Seconds()
	share, pauses := t.paused()
	fmt.Printf("paced client while the engine migrates: %.0f writes/s acknowledged over %s; latency %s (alone %s)\n",
		acked, elapsed.Round(time.Millisecond), during, solo)
	fmt.Printf("%-42s %8.0f objects/s  (%s; %d pauses, %.1f%% of the run)\n", "engine (defaults) meanwhile", engineRate, t, pauses, 100*share)
	p99 := during.quantile(0.99).Seconds() / solo.quantile(0.99).Seconds()
	return acked / openLoopRate, p99, engineRate, b.drop(ctx, gvr.Group)
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

// ratios prints fs as ratios, with their median.
func ratios(fs []float64) string {
	var parts []string
	for _, f := range fs {
		parts = append(parts, fmt.Sprintf("%.1fx", f))
	}
	sorted := slices.Sorted(slices.Values(fs))
	return fmt.Sprintf("%s (median %.1fx)", strings.Join(parts, ", "), sorted[len(sorted)/2])
}

func percents(fs []float64) string {
	var parts []string
	for _, f := range fs {
		parts = append(parts, fmt.Sprintf("%.0f%%", 100*f))
	}
	return strings.Join(parts, ", ")
}

// foreground runs writers writers, each merge-patching its own share of the
// objects of gvr in a loop until ctx is done, and returns the writes the API
// server acknowledged, recording each one's latency (and counting it in c,
// when set).
func foreground(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, writers int, lat *latencies, c *counter) (int64, error) {
	var (
		writes atomic.Int64
		wg     sync.WaitGroup
		errs   = make(chan error, writers)
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				i := (w + k*writers) % foregroundObjects
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
