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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/graduator/graduator/internal/roundtrip"
	"github.com/graduator/graduator/migration"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/gitops"
	"github.com/graduator/graduator/test/pizzaenv"
)

// webhookContender is one way of rewriting the Pizzas in the webhook
// section.
type webhookContender struct {
	name string
	run  func(context.Context, schema.GroupVersionResource) error
}

// webhookSection measures the sample Pizza API behind its conversion
// webhook (served in this process): N Pizzas created at v1alpha1 by one
// field manager and annotated at v1alpha1 by another, so that each carries
// two managedFields entries at v1alpha1, as controllers not yet moved to
// v1beta1 leave them; then v1beta1 stores. Each round, on a population of
// its own each: the 64-writer merge-patch ceiling at the storage version,
// the engine at its defaults as the operator runs it (each object written
// at v1alpha1, where all its entries are: Options.WriteVersions), and the
// engine writing every object at the storage version; their objects/s and
// the ConversionReviews the API server sent per object. Then the
// politeness rule in the same setting: an 8-writer closed-loop foreground
// (another CRD) alone, while the engine at its defaults migrates the
// Pizzas, and alone again.
func (b *bench) webhookSection(ctx context.Context) error {
	n := b.opts.n
	fmt.Printf("\n== a conversion webhook (the Pizza sample), two managedFields entries per object at v1alpha1, v1beta1 stores, N=%d, %d rounds ==\n", n, b.opts.rounds)
	// The webhook server logs through controller-runtime: the section
	// prints figures only.
	ctrllog.SetLogger(logr.Discard())
	webhook, err := pizzaenv.StartWebhook(ctx)
	if err != nil {
		return err
	}
	defer webhook.Stop()
	contenders := []webhookContender{
		{"ceiling (64 writers, merge patch at v1beta1)", func(ctx context.Context, gvr schema.GroupVersionResource) error {
			return ceiling(ctx, b.dyn, gvr, 64)
		}},
		{"engine (defaults, writes at v1alpha1)", func(ctx context.Context, gvr schema.GroupVersionResource) error {
			return engine(ctx, b.dyn, migration.Options{Resource: gvr, Config: b.cfg, WriteVersions: []string{"v1alpha1"}})
		}},
		{"engine (defaults, writes at v1beta1)", func(ctx context.Context, gvr schema.GroupVersionResource) error {
			return engine(ctx, b.dyn, migration.Options{Resource: gvr, Config: b.cfg})
		}},
		{"proof of every object (after the switch)", func(ctx context.Context, gvr schema.GroupVersionResource) error {
			return b.proveEvery(ctx, gvr)
		}},
	}
	elapsed := make([]time.Duration, len(contenders))
	reviews := make([]float64, len(contenders))
	for round := range b.opts.rounds {
		for k := range contenders {
			i := (k + round) % len(contenders)
			took, r, err := b.webhookRun(ctx, webhook, contenders[i])
			if err != nil {
				return fmt.Errorf("%s: %w", contenders[i].name, err)
			}
			elapsed[i] += took
			reviews[i] += r
			fmt.Printf("%-46s %8.0f objects/s  %5.2f ConversionReviews per object  (%s, round %d)\n",
				contenders[i].name, float64(n)/took.Seconds(), r/float64(n), took.Round(time.Millisecond), round+1)
		}
	}
	total := float64(n * b.opts.rounds)
	for i, ct := range contenders {
		fmt.Printf("%-46s %8.0f objects/s  %5.2f ConversionReviews per object  over %d rounds\n",
			ct.name, total/elapsed[i].Seconds(), reviews[i]/total, b.opts.rounds)
	}
	fmt.Printf("engine (defaults, writes at v1alpha1) / ceiling: %.2fx\n", elapsed[0].Seconds()/elapsed[1].Seconds())
	fmt.Printf("engine (defaults, writes at v1beta1) / ceiling: %.2fx\n", elapsed[0].Seconds()/elapsed[2].Seconds())
	return b.webhookPolite(ctx, webhook)
}

// proveEvery proves every Pizza through gvr's version, as the migration's
// preflight does, and prints the objects it sent the webhook itself (there
// and back, in batched reviews): the API server's reviews (its LIST at the
// old version, the dry runs of the class sample) are webhookRun's count.
func (b *bench) proveEvery(ctx context.Context, gvr schema.GroupVersionResource) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := b.c.Get(ctx, client.ObjectKey{Name: pizzaenv.CRDName}, crd); err != nil {
		return err
	}
	var reviews, objects atomic.Int64
	r, err := roundtrip.Prove(ctx, b.dyn, crd, roundtrip.Options{Target: gvr.Version,
		WebhookTransport: func(next http.RoundTripper) http.RoundTripper {
			return countReviews{next: next, reviews: &reviews, objects: &objects}
		}})
	if err != nil {
		return err
	}
	if !r.Lossless() {
		return fmt.Errorf("the sample conversion proved lossy: %s", r.Message())
	}
	fmt.Printf("  the proof sent the webhook %.2f objects per object in %.3f reviews per object (%s, %d dry runs)\n",
		float64(objects.Load())/float64(b.opts.n), float64(reviews.Load())/float64(b.opts.n), r.Source, r.Versions[0].DryRun)
	return nil
}

// countReviews counts the ConversionReviews a round trip sends and the
// objects in them.
type countReviews struct {
	next             http.RoundTripper
	reviews, objects *atomic.Int64
}

func (c countReviews) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		_ = req.Body.Close()
		var review struct {
			Request struct {
				Objects []json.RawMessage `json:"objects"`
			} `json:"request"`
		}
		if json.Unmarshal(body, &review) == nil {
			c.reviews.Add(1)
			c.objects.Add(int64(len(review.Request.Objects)))
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	return c.next.RoundTrip(req)
}

// webhookRun runs one contender on a fresh Pizza population: its time and
// the ConversionReviews the API server sent meanwhile.
func (b *bench) webhookRun(ctx context.Context, webhook *pizzaenv.Webhook, ct webhookContender) (time.Duration, float64, error) {
	gvr, err := b.pizzas(ctx, webhook)
	if err != nil {
		return 0, 0, err
	}
	before, err := envtestutil.ConversionReviewsByDirection(ctx, b.cfg, pizzaenv.CRDName)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if err := ct.run(ctx, gvr); err != nil {
		return 0, 0, err
	}
	took := time.Since(start)
	after, err := envtestutil.ConversionReviewsByDirection(ctx, b.cfg, pizzaenv.CRDName)
	if err != nil {
		return 0, 0, err
	}
	var reviews float64
	directions := make([]string, 0, len(after))
	for direction, count := range after {
		if d := count - before[direction]; d > 0 {
			reviews += d
			directions = append(directions, fmt.Sprintf("%s %.2f", direction, d/float64(b.opts.n)))
		}
	}
	slices.Sort(directions)
	fmt.Printf("  ConversionReviews per object by direction: %s\n", strings.Join(directions, ", "))
	return took, reviews, b.dropPizzas(ctx)
}

// webhookPolite is the politeness rule beside a webhook-bound migration:
// the share of its rate alone an 8-writer closed-loop foreground keeps
// while the engine at its defaults migrates the Pizzas.
func (b *bench) webhookPolite(ctx context.Context, webhook *pizzaenv.Webhook) error {
	const writers = 8
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
	solo := func() (float64, error) {
		fctx, cancel := context.WithTimeout(ctx, b.opts.politeFor)
		defer cancel()
		start := time.Now()
		writes, err := foreground(fctx, b.dyn, fg, writers, &latencies{}, nil)
		if err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			return 0, err
		}
		return float64(writes) / time.Since(start).Seconds(), ctx.Err()
	}
	gvr, err := b.pizzas(ctx, webhook)
	if err != nil {
		return err
	}
	alone, err := solo()
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancel(ctx)
	var (
		writes int64
		fgErr  error
		done   = make(chan struct{})
	)
	start := time.Now()
	go func() {
		defer close(done)
		writes, fgErr = foreground(fctx, b.dyn, fg, writers, &latencies{}, nil)
	}()
	engineErr := engine(ctx, b.dyn, migration.Options{Resource: gvr, Config: b.cfg, WriteVersions: []string{"v1alpha1"}})
	took := time.Since(start)
	cancel()
	<-done
	if engineErr != nil {
		return fmt.Errorf("engine: %w", engineErr)
	}
	if fgErr != nil && !errors.Is(fgErr, context.Canceled) {
		return fmt.Errorf("foreground: %w", fgErr)
	}
	if err := b.dropPizzas(ctx); err != nil {
		return err
	}
	again, err := solo()
	if err != nil {
		return err
	}
	kept := float64(writes) / took.Seconds() / ((alone + again) / 2)
	verdict := "met"
	if kept < migration.BackgroundKept {
		verdict = "NOT met"
	}
	fmt.Printf("%d-writer foreground alone %.0f and %.0f writes/s, during the migration %.0f writes/s (the engine at %.0f objects/s): kept %.0f%%; the politeness rule (>= %.0f%%) %s\n",
		writers, alone, again, float64(writes)/took.Seconds(), float64(b.opts.n)/took.Seconds(), 100*kept, 100*migration.BackgroundKept, verdict)
	return nil
}

// pizzas installs the Pizza CRD pointed at webhook, creates N Pizzas at
// v1alpha1 with two managedFields entries there, makes v1beta1 the storage
// version and waits until the API server writes it: the resource to
// migrate, at v1beta1.
func (b *bench) pizzas(ctx context.Context, webhook *pizzaenv.Webhook) (schema.GroupVersionResource, error) {
	stored := pizzaenv.Resource("v1beta1")
	stage, err := pizzaenv.Stage(2) // v1alpha1 stores, v1beta1 converted by the webhook
	if err != nil {
		return stored, err
	}
	webhook.PointConversionAt(stage)
	if err := gitops.Apply(ctx, b.c, stage); err != nil {
		return stored, err
	}
	if err := pizzaenv.WaitServed(ctx, b.c, b.dyn, pizzaenv.CRDName); err != nil {
		return stored, err
	}
	alpha := b.dyn.Resource(pizzaenv.Resource("v1alpha1")).Namespace("default")
	err = envtestutil.ForEach(b.opts.n, 8, func(i int) error {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pizzaenv.SampleV1alpha1(i))
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{Object: content}
		obj.SetAPIVersion("restaurant.example.com/v1alpha1")
		obj.SetKind("Pizza")
		if _, err := alpha.Create(ctx, obj, metav1.CreateOptions{FieldManager: "order-desk"}); err != nil {
			return err
		}
		_, err = alpha.Patch(ctx, obj.GetName(), types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"restaurant.example.com/oven":"2"}}}`), metav1.PatchOptions{FieldManager: "oven"})
		return err
	})
	if err != nil {
		return stored, fmt.Errorf("create the Pizzas: %w", err)
	}
	if err := envtestutil.SetStorageVersion(ctx, b.c, pizzaenv.CRDName, "v1beta1"); err != nil {
		return stored, err
	}
	if err := b.settled(ctx, stored, "restaurant.example.com/v1beta1"); err != nil {
		return stored, err
	}
	return stored, envtestutil.WaitConversionsQuiet(ctx, b.cfg, pizzaenv.CRDName)
}

// settled waits until a probe Pizza written at gvr is stored as
// apiVersion: the API server writes the new storage version.
func (b *bench) settled(ctx context.Context, gvr schema.GroupVersionResource, apiVersion string) error {
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": "Pizza",
		"metadata": map[string]any{"name": "probe", "namespace": "kube-system"},
		"spec":     map[string]any{},
	}}
	probes := b.dyn.Resource(gvr).Namespace("kube-system")
	if _, err := probes.Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the probe: %w", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := probes.Patch(ctx, "probe", types.MergePatchType,
			fmt.Appendf(nil, `{"metadata":{"annotations":{"probe":%q}}}`, time.Now()), metav1.PatchOptions{}); err != nil {
			return err
		}
		versions, err := b.env.Etcd.APIVersions(ctx, gvr.Group, gvr.Resource)
		if err != nil {
			return err
		}
		if versions["kube-system/probe"] == apiVersion {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server still writes %s Pizzas as %s", gvr.Version, versions["kube-system/probe"])
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	return probes.Delete(ctx, "probe", metav1.DeleteOptions{})
}

// dropPizzas removes the Pizzas from etcd, then the CRD.
func (b *bench) dropPizzas(ctx context.Context) error {
	prefix := fmt.Sprintf("%s/restaurant.example.com/pizzas/", b.env.Etcd.Prefix)
	if _, err := b.env.Etcd.Client().Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("delete the Pizzas from etcd: %w", err)
	}
	return envtestutil.DeleteCRD(ctx, b.c, pizzaenv.CRDName, 2*time.Minute)
}
