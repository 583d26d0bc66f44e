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

	"gonum.org/v1/plot/plotter"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/graduator/graduator/internal/limit"
	"github.com/graduator/graduator/migration"
	"github.com/graduator/graduator/test/envtestutil"
)

// foregroundObjects is how many objects of its own CRD the foreground
// writes.
const foregroundObjects = 64

// foregroundSizes are the closed-loop foregrounds measured, the first (8
// writers) the one the targets and the plots are about.
var foregroundSizes = []int{8, 1, 32}

// polite measures, each round and in each identity (identity.go): the
// engine at its defaults on an idle server (its rate, the share of the run
// spent pausing); for each of foregroundSizes, a closed-loop foreground
// client (writers merge-patching their own objects of another CRD in a
// loop) alone, while the engine migrates N small objects at its defaults,
// and alone again; then a client paced at openLoopRate writes a second,
// alone and during a migration. Every ratio is taken within its round and
// identity; the summary gives each round's figures and their median.
func (b *bench) polite(ctx context.Context) error {
	n := b.opts.n
	fmt.Printf("\n== politeness: closed-loop foregrounds of %v writers and a client paced at %d writes/s (merge patches to another CRD) vs the engine at its defaults, N=%d, %d rounds, identities %v ==\n",
		foregroundSizes, openLoopRate, n, b.opts.rounds, b.opts.identities)
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
	ids, err := b.identities(ctx)
	if err != nil {
		return err
	}
	results := make([]*politeResults, len(ids))
	for i := range ids {
		results[i] = newPoliteResults()
	}
	for round := range b.opts.rounds {
		for i, id := range ids {
			fmt.Printf("-- round %d, identity %s --\n", round+1, id.name)
			if err := b.politeRound(ctx, id, fg, round, results[i]); err != nil {
				return fmt.Errorf("round %d, identity %s: %w", round+1, id.name, err)
			}
		}
	}
	for i, id := range ids {
		results[i].print(id.name, b.opts.rounds)
	}
	return nil
}

// politeResults are one identity's figures, a value per round.
type politeResults struct {
	idleRate, idlePaused []float64
	kept, beside         map[int][]float64
	pacedKept, pacedP99  []float64
	// pacedDuringP99 and pacedAloneP99 are the paced client's p99s, for
	// its target.
	pacedDuringP99, pacedAloneP99 []time.Duration
	pacedSettledP99               []float64
	pacedEngine                   []float64
	alone8, sharing8              latencies
	pacedAlone, pacedDuring       latencies
}

func newPoliteResults() *politeResults {
	return &politeResults{kept: map[int][]float64{}, beside: map[int][]float64{}}
}

// politeRound runs one round of the section in one identity.
func (b *bench) politeRound(ctx context.Context, id identity, fg schema.GroupVersionResource, round int, r *politeResults) error {
	idle, share, err := b.politeIdle(ctx, id)
	if err != nil {
		return err
	}
	r.idleRate, r.idlePaused = append(r.idleRate, idle), append(r.idlePaused, share)
	for _, writers := range foregroundSizes {
		alone, sharing := &latencies{}, &latencies{}
		if writers == 8 {
			alone, sharing = &r.alone8, &r.sharing8
		}
		k, engineRate, err := b.besideClosedLoop(ctx, id, fg, writers, round, alone, sharing)
		if err != nil {
			return err
		}
		r.kept[writers] = append(r.kept[writers], k)
		r.beside[writers] = append(r.beside[writers], engineRate/idle)
	}
	f, err := b.besidePaced(ctx, id, fg, round, &r.pacedAlone, &r.pacedDuring)
	if err != nil {
		return err
	}
	r.pacedKept = append(r.pacedKept, f.kept)
	r.pacedEngine = append(r.pacedEngine, f.engineRate/idle)
	r.pacedP99 = append(r.pacedP99, f.p99)
	r.pacedDuringP99, r.pacedAloneP99 = append(r.pacedDuringP99, f.duringP99), append(r.pacedAloneP99, f.aloneP99)
	r.pacedSettledP99 = append(r.pacedSettledP99, f.settledP99)
	return nil
}

func (r *politeResults) print(identity string, rounds int) {
	fmt.Printf("\n-- politeness, identity %s, %d rounds (each ratio within its round) --\n", identity, rounds)
	fmt.Printf("idle, the engine's rate: %s objects/s; the share of the run spent pausing: %s; %s\n", counts(r.idleRate), percents(r.idlePaused), median(r.idlePaused))
	for _, writers := range foregroundSizes {
		fmt.Printf("%2d-writer closed-loop foreground kept: %s; %s (least %.0f%%); the engine beside it at %s of its idle rate (%s)\n",
			writers, percents(r.kept[writers]), median(r.kept[writers]), 100*slices.Min(r.kept[writers]), percents(r.beside[writers]), median(r.beside[writers]))
	}
	fmt.Printf("8-writer foreground write latency alone: %s; while the engine migrates: %s\n", &r.alone8, &r.sharing8)
	fmt.Printf("paced client (%d writes/s) kept: %s; %s; p99 during / alone, each round: %s; the engine beside it at %s of its idle rate (%s)\n",
		openLoopRate, percents(r.pacedKept), median(r.pacedKept), ratios(r.pacedP99), percents(r.pacedEngine), median(r.pacedEngine))
	fmt.Printf("paced client p99 during / alone, its writes sent after the engine's first pause only: %s\n", ratios(r.pacedSettledP99))
	fmt.Printf("paced client latency alone: %s; while the engine migrates: %s\n", &r.pacedAlone, &r.pacedDuring)
	r.verdict()
}

// Politeness targets, each held in every round.
const (
	// closedKeptMin: a closed-loop foreground keeps this share of its rate
	// alone (the 1-writer one is a latency measure: its rate is 1/latency).
	closedKeptMin = 0.5
	// besideEightMin: the engine beside the 8-writer foreground, of its
	// idle rate; besidePacedMin beside the paced client.
	besideEightMin, besidePacedMin = 0.3, 0.5
	// idlePausedMax: the share of an idle run spent pausing.
	idlePausedMax = 0.05
)

// pacedBound is the paced client's p99 target during a migration: twice
// its p99 alone, or 20 ms more, whichever is more. 20 ms is a fiftieth of
// Kubernetes' SLO for mutating calls (p99 <= 1 s), below what a controller
// notices; a ratio alone on a 5 ms base reads a few milliseconds of queueing
// as failure.
func pacedBound(alone time.Duration) time.Duration {
	return max(2*alone, alone+20*time.Millisecond)
}

// verdict prints, for each target, each round's figure and whether every
// round met it.
func (r *politeResults) verdict() {
	fmt.Println("verdict (every round):")
	for _, writers := range foregroundSizes {
		fmt.Printf("  %2d-writer foreground keeps >= %.0f%%: %s (%s)\n", writers, 100*closedKeptMin, percents(r.kept[writers]),
			metOrMissed(slices.Min(r.kept[writers]) >= closedKeptMin))
	}
	fmt.Printf("  the engine beside 8 writers >= %.2f of its idle rate: %s (%s)\n", besideEightMin, percents(r.beside[8]),
		metOrMissed(slices.Min(r.beside[8]) >= besideEightMin))
	met, rounds := true, make([]string, len(r.pacedDuringP99))
	for i, during := range r.pacedDuringP99 {
		bound := pacedBound(r.pacedAloneP99[i])
		met = met && during <= bound
		rounds[i] = fmt.Sprintf("%s <= %s", during.Round(100*time.Microsecond), bound.Round(100*time.Microsecond))
	}
	fmt.Printf("  the paced client's p99 during <= max(2x alone, alone + 20 ms): %s (%s)\n", strings.Join(rounds, ", "), metOrMissed(met))
	fmt.Printf("  the engine beside the paced client >= %.2f of its idle rate: %s (%s)\n", besidePacedMin, percents(r.pacedEngine),
		metOrMissed(slices.Min(r.pacedEngine) >= besidePacedMin))
	fmt.Printf("  an idle run pauses <= %.0f%% of it: %s (%s)\n", 100*idlePausedMax, percents(r.idlePaused),
		metOrMissed(slices.Max(r.idlePaused) <= idlePausedMax))
}

// politeIdle migrates N small objects at the defaults on an otherwise idle
// server: the engine's idle rate, and the share of the run spent pausing.
func (b *bench) politeIdle(ctx context.Context, id identity) (float64, float64, error) {
	gvr, err := b.population(ctx, b.opts.n, smallNotes)
	if err != nil {
		return 0, 0, err
	}
	t := newTrace(limit.Start)
	if err := engine(t.context(ctx), id.engineDyn, t.options(migration.Options{Resource: gvr, Config: id.engine})); err != nil {
		return 0, 0, fmt.Errorf("engine: %w", err)
	}
	t.done()
	rate := float64(b.opts.n) / t.end.Seconds()
	share, pauses := t.paused()
	fmt.Printf("%-42s %8.0f objects/s  (%s; %d pauses, %.1f%% of the run)\n%s", "engine (defaults), idle", rate, t, pauses, 100*share, t.startLines())
	return rate, share, b.drop(ctx, gvr.Group)
}

// besideClosedLoop runs a closed-loop foreground of writers alone, while
// the engine migrates N small objects at its defaults, and alone again: the
// share of its rate alone it kept, and the engine's rate.
func (b *bench) besideClosedLoop(ctx context.Context, id identity, fg schema.GroupVersionResource, writers, round int, alone, sharing *latencies) (float64, float64, error) {
	solo := func(label string) (float64, error) {
		fctx, cancel := context.WithTimeout(ctx, b.opts.politeFor)
		defer cancel()
		start := time.Now()
		writes, err := foreground(fctx, id.foregroundDyn, fg, writers, alone, nil)
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
	t := newTrace(limit.Start)
	fgWrites := newCounter(t.start)
	go func() {
		defer close(done)
		writes, fgErr = foreground(fctx, id.foregroundDyn, fg, writers, sharing, fgWrites)
	}()
	engineErr := engine(t.context(ctx), id.engineDyn, t.options(migration.Options{Resource: gvr, Config: id.engine}))
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
	fmt.Printf("%-42s %8.0f objects/s  (%s; %d pauses, %.1f%% of the run)\n%s", "engine (defaults) meanwhile", engineRate, t, pauses, 100*share, t.startLines())
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
		if err := b.timelinePlots("polite-"+id.name, fmt.Sprintf("%s: the engine at its defaults beside a %d-writer foreground", id.name, writers), t, fgWrites); err != nil {
			return 0, 0, err
		}
	}
	return k, engineRate, nil
}

// openLoopRate is the paced client's writes per second.
const openLoopRate = 100

// pacedFigures are what a paced client's run beside the engine measured.
type pacedFigures struct {
	// kept is the share of its rate it kept; p99 its p99 latency during
	// the migration against alone, and settledP99 the same over its writes
	// sent after the engine's first pause (until then the engine writes
	// at its first limit, knowing nothing of the others).
	kept, p99, settledP99 float64
	// engineRate is the engine's objects per second.
	engineRate float64
	// duringP99 and aloneP99 are its p99 latencies.
	duringP99, aloneP99 time.Duration
}

// besidePaced sends openLoopRate writes a second to fg, whatever their
// latency (as a controller reacting to events does), alone and then while
// the engine migrates N small objects. Its latencies are added to alone
// and sharing.
func (b *bench) besidePaced(ctx context.Context, id identity, fg schema.GroupVersionResource, round int, alone, sharing *latencies) (pacedFigures, error) {
	fctx, cancel := context.WithTimeout(ctx, b.opts.politeFor)
	solo := &latencies{}
	sent, err := paced(fctx, id.foregroundDyn, fg, solo)
	cancel()
	if err != nil {
		return pacedFigures{}, err
	}
	for _, d := range solo.d {
		alone.add(d)
	}
	fmt.Printf("paced client alone: %d writes over %s\n", sent, b.opts.politeFor)
	gvr, err := b.population(ctx, b.opts.n, smallNotes)
	if err != nil {
		return pacedFigures{}, err
	}
	fctx, cancel = context.WithCancel(ctx)
	t := newTrace(limit.Start)
	var (
		during = &latencies{start: t.start}
		fgErr  error
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		_, fgErr = paced(fctx, id.foregroundDyn, fg, during)
	}()
	engineErr := engine(t.context(ctx), id.engineDyn, t.options(migration.Options{Resource: gvr, Config: id.engine}))
	t.done()
	elapsed := time.Since(t.start)
	cancel()
	<-done
	if engineErr != nil {
		return pacedFigures{}, fmt.Errorf("engine: %w", engineErr)
	}
	if fgErr != nil {
		return pacedFigures{}, fmt.Errorf("paced client: %w", fgErr)
	}
	for _, d := range during.d {
		sharing.add(d)
	}
	acked := float64(len(during.d)) / elapsed.Seconds()
	engineRate := float64(b.opts.n) / elapsed.Seconds()
	share, pauses := t.paused()
	fmt.Printf("paced client while the engine migrates: %.0f writes/s acknowledged over %s; latency %s (alone %s)\n",
		acked, elapsed.Round(time.Millisecond), during, solo)
	fmt.Printf("%-42s %8.0f objects/s  (%s; %d pauses, %.1f%% of the run)\n%s", "engine (defaults) meanwhile", engineRate, t, pauses, 100*share, t.startLines())
	f := pacedFigures{kept: acked / openLoopRate, engineRate: engineRate,
		p99:       during.quantile(0.99).Seconds() / solo.quantile(0.99).Seconds(),
		duringP99: during.quantile(0.99), aloneP99: solo.quantile(0.99)}
	if first := t.firstPause(); first >= 0 {
		settled := during.sentFrom(first)
		f.settledP99 = settled.quantile(0.99).Seconds() / solo.quantile(0.99).Seconds()
		fmt.Printf("paced client, its writes sent after the engine's first pause (at %s): latency %s\n", first.Round(time.Millisecond), settled)
	}
	if round == 0 {
		if err := b.pacedPlots("polite-"+id.name+"-paced", fmt.Sprintf("%s: a client paced at %d writes/s beside the engine", id.name, openLoopRate), t, during, solo); err != nil {
			return pacedFigures{}, err
		}
	}
	return f, b.drop(ctx, gvr.Group)
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

// latencies collects write latencies and, when start is set, when each
// write was acknowledged.
type latencies struct {
	mu    sync.Mutex
	start time.Time
	d     []time.Duration
	at    []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.d = append(l.d, d)
	if !l.start.IsZero() {
		l.at = append(l.at, time.Since(l.start))
	}
}

// sentFrom is the latencies of the writes sent at or after from.
func (l *latencies) sentFrom(from time.Duration) *latencies {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := &latencies{}
	for i, at := range l.at {
		if at-l.d[i] >= from {
			out.d = append(out.d, l.d[i])
		}
	}
	return out
}

// overTime is the q-quantile of the latencies acknowledged in each bucket
// of time, in milliseconds, at the bucket's middle.
func (l *latencies) overTime(q float64) plotter.XYs {
	l.mu.Lock()
	defer l.mu.Unlock()
	var buckets [][]time.Duration
	for i, at := range l.at {
		k := int(at / bucket)
		for len(buckets) <= k {
			buckets = append(buckets, nil)
		}
		buckets[k] = append(buckets[k], l.d[i])
	}
	var xy plotter.XYs
	for k, b := range buckets {
		if len(b) == 0 {
			continue
		}
		slices.Sort(b)
		xy = append(xy, plotter.XY{X: (float64(k) + 0.5) * bucket.Seconds(), Y: float64(b[min(len(b)-1, int(q*float64(len(b))))]) / float64(time.Millisecond)})
	}
	return xy
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

// counts prints fs as whole numbers.
func counts(fs []float64) string {
	var parts []string
	for _, f := range fs {
		parts = append(parts, fmt.Sprintf("%.0f", f))
	}
	return strings.Join(parts, ", ")
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
