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

// Command demo walks the sample Pizza CRD through a whole graduation on an
// embedded control plane (envtest's kube-apiserver and etcd), with the
// operator and the sample conversion webhook running in this process, and
// narrates each step. No cluster is needed: `make demo`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap/zapcore"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/controllers"
	"github.com/graduator/graduator/graduationtest"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/internal/sample"
)

const (
	group   = "restaurant.example.com"
	crdName = "pizzas." + group
)

func main() {
	count := flag.Int("pizzas", 2000, "How many Pizzas to create at v1alpha1.")
	grace := flag.Duration("grace", 5*time.Second, "Grace period before v1alpha1 stops being served.")
	flag.Parse()

	// Only errors are logged: the narration is the output.
	log.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel)))
	start := time.Now()
	if err := run(*count, *grace); err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo failed: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("\nDone in %s.\n", time.Since(start).Round(time.Second))
}

// say prints one line of narration.
func say(format string, args ...any) { fmt.Printf(format+"\n", args...) }

func run(count int, grace time.Duration) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	root, err := sample.ModuleRoot()
	if err != nil {
		return err
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		if err := os.Setenv("KUBEBUILDER_ASSETS", filepath.Join(root, "bin", "k8s")); err != nil {
			return err
		}
	}

	say("== Starting an embedded control plane (kube-apiserver and etcd from %s)", os.Getenv("KUBEBUILDER_ASSETS"))
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("start the control plane: %w", err)
	}
	defer func() {
		say("== Stopping the control plane")
		_ = env.Stop()
	}()

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, graduatorv1alpha1.AddToScheme, sample.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	store, err := graduationtest.NewEtcdStore(env.ControlPlane.Etcd.URL.String())
	if err != nil {
		return err
	}
	defer func() { _ = store.Close() }()

	say("== Starting the sample conversion webhook and the Graduator operator")
	webhook, err := sample.StartWebhook(ctx)
	if err != nil {
		return fmt.Errorf("start the webhook: %w", err)
	}
	defer webhook.Stop()
	// The demo starts its own etcd, so it knows the quota and tells it, as
	// every door that starts its own etcd does.
	quota, err := store.Quota(ctx)
	if err != nil {
		return err
	}
	stopOperator, err := startOperator(ctx, cfg, scheme, quota)
	if err != nil {
		return err
	}
	say("   etcd's quota, as etcd reports it and told to the operator (--etcd-quota): %s", resource.NewQuantity(quota, resource.BinarySI))
	defer stopOperator()

	applyStage := func(n int, what string) error {
		crd, err := sample.Stage(n)
		if err != nil {
			return err
		}
		webhook.PointConversionAt(crd)
		if err := sample.ApplyCRD(ctx, c, crd); err != nil {
			return err
		}
		if err := graduationtest.WaitServed(ctx, c, dyn, crdName, 30*time.Second); err != nil {
			return err
		}
		say("   applied config/samples/pizza/%d-*.yaml: %s", n, what)
		return nil
	}
	describe := func() {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: crdName}, &crd); err != nil {
			return
		}
		var versions []string
		for _, v := range crd.Spec.Versions {
			flags := []string{}
			if v.Served {
				flags = append(flags, "served")
			} else {
				flags = append(flags, "not served")
			}
			if v.Storage {
				flags = append(flags, "storage")
			}
			if v.Deprecated {
				flags = append(flags, "deprecated")
			}
			versions = append(versions, fmt.Sprintf("%s (%s)", v.Name, strings.Join(flags, ", ")))
		}
		say("   CRD versions: %s", strings.Join(versions, "; "))
		say("   status.storedVersions: [%s]", strings.Join(crd.Status.StoredVersions, ", "))
		say("   etcd holds: %s", store.Summary(ctx, group, "pizzas"))
	}

	say("\n== Stage 1: the Pizza CRD serves and stores v1alpha1")
	if err := applyStage(1, "v1alpha1 only"); err != nil {
		return err
	}
	say("   creating %d Pizzas at v1alpha1 ...", count)
	if err := createPizzas(ctx, c, count); err != nil {
		return err
	}
	describe()

	say("\n== Could we drop v1alpha1 right away? The API server says no:")
	if err := applyStage(6, "v1alpha1 removed"); err == nil {
		return errors.New("the API server accepted removing a stored version: the demo's premise is wrong")
	} else {
		say("   refused: %s", shorten(err.Error(), 220))
	}

	say("\n== Stage 2: v1beta1 is added, converted by the webhook; v1alpha1 still stores")
	if err := applyStage(2, "v1alpha1 stored, v1beta1 served"); err != nil {
		return err
	}
	describe()

	say("\n== A CRDVersionPolicy asks for v1beta1 storage and retires v1alpha1 after %s", grace)
	policy := &graduatorv1alpha1.CRDVersionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: crdName},
		Spec: graduatorv1alpha1.CRDVersionPolicySpec{
			StorageVersion: "v1beta1",
			Deprecate: []graduatorv1alpha1.DeprecatedVersion{{
				Version: "v1alpha1", Warning: "restaurant.example.com/v1alpha1 Pizza is deprecated; use v1",
			}},
			Unserve:   []graduatorv1alpha1.UnservedVersion{{Version: "v1alpha1", After: &metav1.Duration{Duration: grace}}},
			Migration: graduatorv1alpha1.MigrationSettings{SettleDelay: &metav1.Duration{Duration: 2 * time.Second}},
		},
	}
	if err := c.Create(ctx, policy); err != nil {
		return err
	}
	if err := narrateUntilReady(ctx, c); err != nil {
		return err
	}
	describe()

	say("\n== Stage 4: v1 is added (the policy owns the version flags; the manifest keeps them)")
	if err := applyStage(4, "v1 served"); err != nil {
		return err
	}
	say("\n== The policy now asks for v1 storage (stage 5, done by the operator)")
	if err := c.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
		return err
	}
	policy.Spec.StorageVersion = "v1"
	if err := c.Update(ctx, policy); err != nil {
		return err
	}
	if err := narrateUntilReady(ctx, c); err != nil {
		return err
	}
	describe()

	say("\n== Stage 6: v1alpha1 is removed from the CRD")
	if err := applyStage(6, "v1alpha1 removed"); err != nil {
		return fmt.Errorf("stage 6 refused after the graduation: %w", err)
	}
	describe()
	say("\nThe Pizza CRD stores only v1, every object in etcd is v1, and v1alpha1 is gone.")
	return nil
}

// narrateUntilReady prints each change of the policy's phase, progress and
// the CRD's storedVersions until the policy is Ready.
func narrateUntilReady(ctx context.Context, c client.Client) error {
	deadline := time.Now().Add(10 * time.Minute)
	start := time.Now()
	last := ""
	for time.Now().Before(deadline) {
		var policy graduatorv1alpha1.CRDVersionPolicy
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: crdName}, &policy); err != nil {
			return err
		}
		if err := c.Get(ctx, client.ObjectKey{Name: crdName}, &crd); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(policy.Status.Conditions, graduatorv1alpha1.ConditionReady)
		progress := "-"
		if m := policy.Status.Migration; m != nil && m.StorageVersion == graduation.StorageVersion(&crd) {
			progress = fmt.Sprintf("%d rewritten, %d skipped, %d failed of %d listed", m.Rewritten, m.Skipped, m.Failed, m.Listed)
		}
		line := fmt.Sprintf("phase %-16s storedVersions [%s]  migration: %s", policy.Status.Phase,
			strings.Join(crd.Status.StoredVersions, ", "), progress)
		if ready != nil {
			line += "\n" + strings.Repeat(" ", 12) + ready.Message
		}
		if line != last && policy.Status.Phase != "" {
			say("   [%5.1fs] %s", time.Since(start).Seconds(), line)
			last = line
		}
		if ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == policy.Generation {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errors.New("the policy did not become Ready within 10 minutes")
}

// createPizzas creates Pizzas at v1alpha1 with a few parallel writers.
func createPizzas(ctx context.Context, c client.Client, count int) error {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < count; i += 8 {
				if err := c.Create(ctx, sample.SampleV1alpha1(i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func startOperator(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, etcdQuota int64) (func(), error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  controllers.CacheOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, err
	}
	if err := controllers.Setup(mgr, controllers.Options{MaxConcurrentGraduations: 2, EtcdQuota: etcdQuota}); err != nil {
		return nil, err
	}
	mgrCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(mgrCtx); err != nil {
			fmt.Fprintf(os.Stderr, "operator: %v\n", err)
		}
	}()
	return func() {
		say("== Stopping the operator and the webhook")
		cancel()
		<-done
	}, nil
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
