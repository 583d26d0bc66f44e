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

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/controllers"
)

// operatorSlack is what the target allows the operator beyond rewriting N
// objects at the ceiling's rate: its settle delay (10 s by default) and the
// steps around the migration.
const operatorSlack = 15 * time.Second

// operator measures a whole graduation in the operator at its defaults: N
// small objects stored at v1, a CRDVersionPolicy asking for v2, and the time
// from the storage flip to status.storedVersions pruned to [v2], against
// N / ceiling + 15 s with the ceiling measured on an identical population
// just before.
func (b *bench) operator(ctx context.Context) error {
	n := b.opts.n
	fmt.Printf("\n== the operator at its defaults: storage flip to storedVersions pruned, N=%d small objects ==\n", n)
	gvr, err := b.population(ctx, n, smallNotes)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := ceiling(ctx, b.dyn, gvr, 64); err != nil {
		return err
	}
	ceilingRate := float64(n) / time.Since(start).Seconds()
	fmt.Printf("%-42s %8.0f objects/s\n", "ceiling (64 writers, merge patch)", ceilingRate)
	if err := b.drop(ctx, gvr.Group); err != nil {
		return err
	}

	v1, err := b.storedAtV1(ctx, n, smallNotes)
	if err != nil {
		return err
	}
	crdName := "widgets." + v1.Group
	stop, err := b.startOperator(ctx)
	if err != nil {
		return err
	}
	defer stop()
	policy := &graduatorv1alpha1.CRDVersionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: crdName},
		Spec:       graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v2"},
	}
	created := time.Now()
	if err := b.c.Create(ctx, policy); err != nil {
		return fmt.Errorf("create the policy: %w", err)
	}
	var flipped, pruned time.Time
	for deadline := created.Add(15 * time.Minute); pruned.IsZero(); {
		if time.Now().After(deadline) {
			return fmt.Errorf("storedVersions of %s not pruned in 15 minutes: %w", crdName, errTimeout)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := b.c.Get(ctx, client.ObjectKey{Name: crdName}, &crd); err != nil {
			return err
		}
		now := time.Now()
		if flipped.IsZero() && storageVersion(&crd) == "v2" {
			flipped = now
		}
		if slices.Equal(crd.Status.StoredVersions, []string{"v2"}) {
			pruned = now
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	took, bound := pruned.Sub(flipped), time.Duration(float64(n)/ceilingRate*float64(time.Second))+operatorSlack
	fmt.Printf("policy created to storage flipped             %s\n", flipped.Sub(created).Round(100*time.Millisecond))
	fmt.Printf("storage flipped to storedVersions pruned      %s  (target N/ceiling + %s = %s: %.2f of it)\n",
		took.Round(100*time.Millisecond), operatorSlack, bound.Round(100*time.Millisecond), took.Seconds()/bound.Seconds())
	if err := b.c.Delete(ctx, policy); err != nil {
		return err
	}
	return b.drop(ctx, v1.Group)
}

// startOperator runs the operator in this process, wired as the binary wires
// it (controllers.Setup), against the benchmark's control plane.
func (b *bench) startOperator(ctx context.Context) (stop func(), err error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, graduatorv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	// Its logs would bury the figures.
	ctrl.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	// The binary's client settings: controller-runtime's default QPS, not
	// the benchmark's unlimited one (the engine builds its own client).
	cfg := rest.CopyConfig(b.cfg)
	cfg.QPS, cfg.Burst = 0, 0
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  controllers.CacheOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, err
	}
	if err := controllers.Setup(mgr, controllers.Options{MaxConcurrentGraduations: 2}); err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Printf("the operator stopped with an error: %v\n", err)
		}
	}, nil
}

// storageVersion is the name of the CRD's storage version.
func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}
