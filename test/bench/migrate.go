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
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graduator/graduator/internal/enginehook"
	"github.com/graduator/graduator/internal/limit"
	"github.com/graduator/graduator/migration"
	"github.com/graduator/graduator/test/envtestutil"
)

// smallNotes makes a widget of about 300 bytes as stored.
const smallNotes = "a widget of typical size, with a few words in it"

// migrations runs the four contenders on identical populations of n widgets
// whose spec.notes is notes.
func (b *bench) migrations(ctx context.Context, label, notes string) error {
	n := b.opts.n
	size, err := b.objectSize(ctx, notes)
	if err != nil {
		return err
	}
	fmt.Printf("\n== %s objects (%d bytes each as JSON), N=%d ==\n", label, size, n)
	type contender struct {
		name string
		run  func(schema.GroupVersionResource) error
	}
	var settled []int
	contenders := []contender{
		{"engine (defaults: adaptive, no QPS cap)", func(gvr schema.GroupVersionResource) error {
			t := newTrace(limit.Start)
			err := engine(t.context(ctx), b.dyn, t.options(migration.Options{Resource: gvr, Config: b.cfg}))
			t.done()
			fmt.Printf("  (adaptive writer limit: %s)\n%s", t, t.startLines())
			settled = append(settled, t.settled())
			if len(settled) == 1 && err == nil {
				err = b.timelinePlots("idle-"+label, "The engine at its defaults on an idle server, "+label+" objects", t, nil)
			}
			return err
		}},
		{"engine (priority Full)", func(gvr schema.GroupVersionResource) error {
			t := newTrace(limit.Initial)
			err := engine(t.context(ctx), b.dyn, t.options(migration.Options{Resource: gvr, Config: b.cfg, Priority: migration.PriorityFull}))
			t.done()
			fmt.Printf("  (adaptive writer limit: %s)\n%s", t, t.startLines())
			return err
		}},
		{"engine (fixed 64 writers)", func(gvr schema.GroupVersionResource) error {
			return engine(fixed(ctx), b.dyn, migration.Options{Resource: gvr, Config: b.cfg, Concurrency: 64})
		}},
		{"baseline (1 writer, GET + PUT)", func(gvr schema.GroupVersionResource) error { return getPut(ctx, b.dyn, gvr) }},
		{"ceiling (64 writers, merge patch)", func(gvr schema.GroupVersionResource) error { return ceiling(ctx, b.dyn, gvr, 64) }},
	}
	// Rounds interleave the contenders, each round in another order, so that
	// a burst of load from elsewhere on the machine falls on all of them
	// alike; a contender's rate is its objects over its time in all rounds.
	elapsed := make([]time.Duration, len(contenders))
	perRound := make([][]time.Duration, len(contenders))
	for round := range b.opts.rounds {
		for k := range contenders {
			i := (k + round) % len(contenders)
			ct := contenders[i]
			gvr, err := b.population(ctx, n, notes)
			if err != nil {
				return err
			}
			start := time.Now()
			if err := ct.run(gvr); err != nil {
				return fmt.Errorf("%s: %w", ct.name, err)
			}
			took := time.Since(start)
			elapsed[i] += took
			perRound[i] = append(perRound[i], took)
			fmt.Printf("%-42s %8.0f objects/s  (%s, round %d)\n", ct.name, float64(n)/took.Seconds(), took.Round(time.Millisecond), round+1)
			if err := b.drop(ctx, gvr.Group); err != nil {
				return err
			}
		}
	}
	rates := make([]float64, len(contenders))
	for i, ct := range contenders {
		rates[i] = float64(n*b.opts.rounds) / elapsed[i].Seconds()
		if b.opts.rounds > 1 {
			fmt.Printf("%-42s %8.0f objects/s  over %d rounds\n", ct.name, rates[i], b.opts.rounds)
		}
	}
	baseline, ceil := rates[3], rates[4]
	fmt.Printf("engine (defaults) / baseline: %.2fx    engine (defaults) / ceiling: %.0f%%\n", rates[0]/baseline, 100*rates[0]/ceil)
	fmt.Printf("engine (priority Full) / baseline: %.2fx    engine (priority Full) / ceiling: %.0f%%\n", rates[1]/baseline, 100*rates[1]/ceil)
	fmt.Printf("engine (fixed 64) / baseline: %.2fx    engine (fixed 64) / ceiling: %.0f%%\n", rates[2]/baseline, 100*rates[2]/ceil)
	fmt.Printf("engine (defaults), where the limit settled each round: %v (max/min %.2f)\n", settled, spread(settled))
	// The same ratios round by round: each against the ceiling measured in
	// its own round.
	for _, i := range []int{0, 1, 2} {
		var ratios []float64
		for round := range perRound[i] {
			ratios = append(ratios, perRound[4][round].Seconds()/perRound[i][round].Seconds())
		}
		fmt.Printf("%s / same round's ceiling, each round: %s; %s\n", contenders[i].name, percents(ratios), median(ratios))
	}
	return nil
}

// median is the median of fs and their range, as percents.
func median(fs []float64) string {
	if len(fs) == 0 {
		return "no rounds"
	}
	sorted := slices.Sorted(slices.Values(fs))
	return fmt.Sprintf("median %.0f%% (range %.0f%%-%.0f%%)", 100*sorted[len(sorted)/2], 100*sorted[0], 100*sorted[len(sorted)-1])
}

// spread is max/min of where limits settled: how repeatable they are.
func spread(limits []int) float64 {
	if len(limits) == 0 || slices.Min(limits) == 0 {
		return 0
	}
	return float64(slices.Max(limits)) / float64(slices.Min(limits))
}

// curveWriters are the fixed writer counts the curve section measures: dense
// below 16, where an idle server's knee lies.
var curveWriters = []int{1, 2, 4, 8, 16, 32, 64}

// curve measures the engine at fixed writer counts on one population size:
// the throughput the adaptive limit chooses among, and the knee.
func (b *bench) curve(ctx context.Context, size, notes string) error {
	n := b.opts.curveN
	fmt.Printf("\n== engine throughput vs fixed writers, %s objects (spec.notes of %d bytes), N=%d ==\n", size, len(notes), n)
	for _, writers := range curveWriters {
		gvr, err := b.population(ctx, n, notes)
		if err != nil {
			return err
		}
		start := time.Now()
		if err := engine(fixed(ctx), b.dyn, migration.Options{Resource: gvr, Config: b.cfg, Concurrency: writers}); err != nil {
			return err
		}
		rate := float64(n) / time.Since(start).Seconds()
		b.knee = append(b.knee, kneePoint{size: size, writers: writers, rate: rate})
		fmt.Printf("engine, %2d writers %8.0f objects/s\n", writers, rate)
		if err := b.drop(ctx, gvr.Group); err != nil {
			return err
		}
	}
	return b.kneePlot()
}

// engine runs the migration engine and insists that it completed.
// fixed is ctx telling the engine to keep Options.Concurrency writers in
// flight rather than adapt: a measurement's knob, not an option.
func fixed(ctx context.Context) context.Context {
	return enginehook.With(ctx, enginehook.Hook{FixedConcurrency: true})
}

func engine(ctx context.Context, dyn dynamic.Interface, opts migration.Options) error {
	if opts.EtcdQuota == 0 {
		// The benchmark's etcd has an 8 GiB quota: with it known, the etcd
		// space budget does not pace the big populations, whose rate is
		// measured here (the quota suite, test/quota, measures the budget).
		opts.EtcdQuota = etcdQuota
	}
	result, err := migration.Run(ctx, dyn, opts)
	if err == nil && (!result.Complete || result.Failed > 0) {
		err = fmt.Errorf("incomplete run: %+v", result.Progress)
	}
	return err
}

// objectSize is the size of a widget with these notes as the API server
// returns it, measured on one object.
func (b *bench) objectSize(ctx context.Context, notes string) (int, error) {
	gvr, err := b.population(ctx, 1, notes)
	if err != nil {
		return 0, err
	}
	list, err := b.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		return 0, fmt.Errorf("list the sample widget: %v (%d items)", err, len(list.Items))
	}
	data, err := json.Marshal(list.Items[0].Object)
	if err != nil {
		return 0, err
	}
	return len(data), b.drop(ctx, gvr.Group)
}

// population creates a CRD with v1 and v2 of one schema, n widgets at v1
// with spec.notes = notes, then switches storage to v2 and returns the
// resource at v2.
func (b *bench) population(ctx context.Context, n int, notes string) (schema.GroupVersionResource, error) {
	v1, err := b.storedAtV1(ctx, n, notes)
	if err != nil {
		return v1, err
	}
	return envtestutil.WidgetResource(v1.Group, "v2"), b.flip(ctx, "widgets."+v1.Group, "v2")
}

// storedAtV1 creates a CRD with v1 and v2 of one schema and n widgets stored
// at v1 with spec.notes = notes, and returns the resource at v1.
func (b *bench) storedAtV1(ctx context.Context, n int, notes string) (schema.GroupVersionResource, error) {
	b.groups++
	group := fmt.Sprintf("p%d.bench.graduator.io", b.groups)
	v1, err := b.widgetCRD(ctx, group)
	if err != nil {
		return v1, err
	}
	const creators = 32
	return v1, envtestutil.CreateObjects(ctx, b.dyn, v1, n, creators, func(i int) *unstructured.Unstructured {
		return envtestutil.Widget(v1, "default", fmt.Sprintf("w-%07d", i), map[string]any{
			"color": "blue", "size": int64(i), "notes": notes,
		})
	})
}

// widgetCRD creates the widget CRD of group (v1 storage, v2 served) and
// waits until it is served.
func (b *bench) widgetCRD(ctx context.Context, group string) (schema.GroupVersionResource, error) {
	crd := envtestutil.WidgetCRD(group, "v1", "v2")
	v1 := envtestutil.WidgetResource(group, "v1")
	if err := b.c.Create(ctx, crd); err != nil {
		return v1, err
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if err := envtestutil.Served(ctx, b.dyn, crd); err == nil {
			return v1, nil
		} else if time.Now().After(deadline) {
			return v1, err
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return v1, err
		}
	}
}

// drop deletes the widget CRD of group and waits until it and its objects
// are gone, so that one population's deletion does not load the next
// measurement and the API server's watch cache does not grow all run.
func (b *bench) drop(ctx context.Context, group string) error {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group}}
	if err := b.c.Delete(ctx, crd); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); {
		err := b.c.Get(ctx, client.ObjectKeyFromObject(crd), crd)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("delete CRD %s: %w", crd.Name, errTimeout)
}

// getPut is the 1-writer baseline: list, then GET and PUT each object.
func getPut(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource) error {
	return eachPage(ctx, dyn, gvr, func(items []unstructured.Unstructured) error {
		for _, item := range items {
			obj, err := dyn.Resource(gvr).Namespace(item.GetNamespace()).Get(ctx, item.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if _, err := dyn.Resource(gvr).Namespace(item.GetNamespace()).Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
}

// ceiling rewrites with many writers and no rate limit.
func ceiling(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, writers int) error {
	_, err := ceilingFor(ctx, dyn, gvr, writers, 0, false)
	return err
}

// ceilingFor is the ceiling for at most d (0: the whole population); it
// returns how many objects it rewrote, so that a rate can be taken over a
// window of a population too big to rewrite whole. With mark, each write
// also sets an annotation, so that it changes the object while the storage
// version stays what it was: the objects then still need the next
// contender's rewrite.
func ceilingFor(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, writers int, d time.Duration, mark bool) (int, error) {
	window := ctx
	if d > 0 {
		var cancel context.CancelFunc
		window, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	var written atomic.Int64
	err := eachPage(window, dyn, gvr, func(items []unstructured.Unstructured) error {
		return envtestutil.ForEach(len(items), writers, func(i int) error {
			patch := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q}}`, items[i].GetResourceVersion())
			if mark {
				patch = fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q,"annotations":{"bench.graduator.io/ceiling":"written"}}}`,
					items[i].GetResourceVersion())
			}
			_, err := dyn.Resource(gvr).Namespace(items[i].GetNamespace()).
				Patch(window, items[i].GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
			if err == nil {
				written.Add(1)
			}
			return err
		})
	})
	if err != nil && ctx.Err() == nil && window.Err() != nil {
		err = nil // the window ended, not the run
	}
	return int(written.Load()), err
}

func eachPage(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, f func([]unstructured.Unstructured) error) error {
	token := ""
	for {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 500, Continue: token})
		if err != nil {
			return err
		}
		if err := f(list.Items); err != nil {
			return err
		}
		if token = list.GetContinue(); token == "" {
			return nil
		}
	}
}
