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
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graduator/graduator/internal/storagemigration"
	"github.com/graduator/graduator/migration"
	"github.com/graduator/graduator/test/envtestutil"
)

// intree times the in-tree StorageVersionMigration (kube-controller-manager's
// migrator) and the engine at its defaults on populations of N small
// objects, each round in the other order.
func (b *bench) intree(ctx context.Context) error {
	n := b.opts.n
	fmt.Printf("\n== the in-tree StorageVersionMigration vs the engine (defaults), small objects, N=%d ==\n", n)
	kcm, err := envtestutil.StartControllerManager(b.env.Environment, io.Discard, envtestutil.InTreeMigratorControllers...)
	if err != nil {
		return err
	}
	defer kcm.Stop()
	// The migrator waits for the garbage collector's informers to sync,
	// which takes minutes on a fresh control plane: a first migration of a
	// few objects absorbs that, untimed.
	gvr, err := b.population(ctx, 10, smallNotes)
	if err != nil {
		return err
	}
	started := time.Now()
	if err := b.svm(ctx, gvr, 10*time.Minute); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	fmt.Printf("  (the in-tree migrator's first run, 10 objects, took %s: its start-up)\n", time.Since(started).Round(time.Second))
	if err := b.drop(ctx, gvr.Group); err != nil {
		return err
	}
	contenders := []struct {
		name string
		run  func(schema.GroupVersionResource) error
	}{
		{"in-tree StorageVersionMigration", func(gvr schema.GroupVersionResource) error { return b.svm(ctx, gvr, 30*time.Minute) }},
		{"engine (defaults)", func(gvr schema.GroupVersionResource) error {
			return engine(ctx, b.dyn, migration.Options{Resource: gvr, Config: b.cfg})
		}},
	}
	elapsed := make([]time.Duration, len(contenders))
	for round := range b.opts.rounds {
		for k := range contenders {
			i := (k + round) % len(contenders)
			gvr, err := b.population(ctx, n, smallNotes)
			if err != nil {
				return err
			}
			start := time.Now()
			if err := contenders[i].run(gvr); err != nil {
				return fmt.Errorf("%s: %w", contenders[i].name, err)
			}
			took := time.Since(start)
			elapsed[i] += took
			fmt.Printf("%-42s %8.0f objects/s  (%s, round %d)\n", contenders[i].name, float64(n)/took.Seconds(), took.Round(time.Millisecond), round+1)
			if err := b.drop(ctx, gvr.Group); err != nil {
				return err
			}
		}
	}
	inTree := float64(n*b.opts.rounds) / elapsed[0].Seconds()
	ours := float64(n*b.opts.rounds) / elapsed[1].Seconds()
	fmt.Printf("in-tree %.0f objects/s, engine %.0f objects/s over %d rounds: the engine is %.1fx the in-tree migrator\n",
		inTree, ours, b.opts.rounds, ours/inTree)
	return nil
}

// svm creates a StorageVersionMigration of gvr's resource and waits until it
// Succeeded and the migrator pruned storedVersions.
func (b *bench) svm(ctx context.Context, gvr schema.GroupVersionResource, timeout time.Duration) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := b.c.Get(ctx, client.ObjectKey{Name: gvr.Resource + "." + gvr.Group}, crd); err != nil {
		return err
	}
	svm := &svmv1.StorageVersionMigration{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-" + gvr.Group},
		Spec:       svmv1.StorageVersionMigrationSpec{Resource: storagemigration.ResourceOf(crd)},
	}
	if err := b.c.Create(ctx, svm); err != nil {
		return err
	}
	defer func() { _ = b.c.Delete(context.WithoutCancel(ctx), svm) }()
	for deadline := time.Now().Add(timeout); ; {
		if err := b.c.Get(ctx, client.ObjectKeyFromObject(svm), svm); err != nil {
			return err
		}
		switch storagemigration.PhaseOf(svm) {
		case storagemigration.Succeeded:
			return nil
		case storagemigration.Failed:
			return fmt.Errorf("StorageVersionMigration %s failed: %v", svm.Name, svm.Status.Conditions)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("StorageVersionMigration %s: %w", svm.Name, errTimeout)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}
