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
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graduator/graduator/internal/roundtrip"
	"github.com/graduator/graduator/migration"
	"github.com/graduator/graduator/test/envtestutil"
)

// proof measures the round-trip proof against the migration it comes
// before, on N small objects each round: the sample proof before the
// storage switch (strategy None: the target schema's pruning), the sample
// and the every-object proof after it (dry-run writes at v1), then the
// migration at its defaults. The proof's cost is its time over the
// migration's, in the same round.
func (b *bench) proof(ctx context.Context) error {
	n := b.opts.n
	fmt.Printf("\n== the round-trip proof before the first write, N=%d small objects ==\n", n)
	var before, after, every []float64
	for round := range b.opts.rounds {
		v1, err := b.storedAtV1(ctx, n, smallNotes)
		if err != nil {
			return err
		}
		crdName := "widgets." + v1.Group
		prove := func(sample bool) (roundtrip.Result, time.Duration, error) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := b.c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
				return roundtrip.Result{}, 0, err
			}
			start := time.Now()
			r, err := roundtrip.Prove(ctx, b.dyn, crd, roundtrip.Options{Target: "v2", Sample: sample})
			took := time.Since(start)
			if err == nil && !r.Lossless() {
				err = fmt.Errorf("a lossless population proved lossy: %s", r.Message())
			}
			return r, took, err
		}
		rBefore, tBefore, err := prove(false)
		if err != nil {
			return err
		}
		if err := b.flip(ctx, crdName, "v2"); err != nil {
			return err
		}
		rAfter, tAfter, err := prove(false)
		if err != nil {
			return err
		}
		_, tSample, err := prove(true)
		if err != nil {
			return err
		}
		start := time.Now()
		if err := engine(ctx, b.dyn, migration.Options{Resource: envtestutil.WidgetResource(v1.Group, "v2"), Config: b.cfg}); err != nil {
			return fmt.Errorf("migration: %w", err)
		}
		tMigrate := time.Since(start)
		fmt.Printf("round %d: migration %s; every object before the switch (%s, %d proven) %s = %.1f%%; after (%s, %d proven) %s = %.1f%%; a sample after %s = %.1f%%\n",
			round+1, tMigrate.Round(time.Millisecond),
			rBefore.Source, proven(rBefore), tBefore.Round(time.Millisecond), 100*tBefore.Seconds()/tMigrate.Seconds(),
			rAfter.Source, proven(rAfter), tAfter.Round(time.Millisecond), 100*tAfter.Seconds()/tMigrate.Seconds(),
			tSample.Round(time.Millisecond), 100*tSample.Seconds()/tMigrate.Seconds())
		before = append(before, tBefore.Seconds()/tMigrate.Seconds())
		after = append(after, tAfter.Seconds()/tMigrate.Seconds())
		every = append(every, tSample.Seconds()/tMigrate.Seconds())
		if err := b.drop(ctx, v1.Group); err != nil {
			return err
		}
	}
	fmt.Printf("proof / migration, median [min, max] of %d rounds: every object before the switch %s; after %s; a sample after %s\n",
		b.opts.rounds, medianSpread(before), medianSpread(after), medianSpread(every))
	return nil
}

func proven(r roundtrip.Result) int {
	total := 0
	for _, v := range r.Versions {
		total += v.Sampled
	}
	return total
}

// medianSpread formats ratios as percentages: median [min, max].
func medianSpread(fs []float64) string {
	s := slices.Clone(fs)
	slices.Sort(s)
	return fmt.Sprintf("%.1f%% [%.1f%%, %.1f%%]", 100*s[len(s)/2], 100*s[0], 100*s[len(s)-1])
}
