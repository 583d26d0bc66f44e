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

// Command bench measures the storage migration engine on an envtest control
// plane against the two ways people migrate today, in one run so the
// machine's noise hits all of them alike:
//
//   - the engine at its defaults (16 writers, QPS 200), and with the QPS cap
//     lifted, to show what the writers alone reach;
//   - a 1-writer GET + PUT baseline: `kubectl get | kubectl replace` and the
//     single-writer migrators;
//   - a 64-writer merge-patch ceiling with no rate limit: what the API server
//     and etcd can take.
//
// Each gets its own CRD with an identical population whose storage version
// was just switched. It then runs the engine in a child process on N and on
// 10xN objects and reports the child's peak RSS. `make bench N=5000`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"syscall"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graduator/graduator/migration"
	"github.com/graduator/graduator/test/envtestutil"
)

func main() {
	n := flag.Int("n", 5000, "Objects per population.")
	rssFactor := flag.Int("rss-factor", 10, "The peak RSS is measured at N and at this many times N.")
	childKubeconfig := flag.String("child-kubeconfig", "", "internal: run the engine on -child-group with this kubeconfig and exit")
	childGroup := flag.String("child-group", "", "internal: the group whose widgets the child migrates")
	flag.Parse()

	if *childKubeconfig != "" {
		if err := child(*childKubeconfig, *childGroup); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*n, *rssFactor); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(n, rssFactor int) error {
	ctx := context.Background()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return fmt.Errorf("KUBEBUILDER_ASSETS is not set; run `make bench`")
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	cfg.QPS, cfg.Burst = -1, 0
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}

	fmt.Printf("Graduator migration benchmark: N=%d objects per population, GOMAXPROCS=%d\n\n", n, runtimeProcs())
	type contender struct {
		name string
		run  func(schema.GroupVersionResource) error
	}
	contenders := []contender{
		{"engine (defaults: adaptive, no QPS cap)", func(gvr schema.GroupVersionResource) error {
			result, err := migration.Run(ctx, dyn, migration.Options{Resource: gvr, Config: cfg})
			if err == nil && (!result.Complete || result.Failed > 0) {
				err = fmt.Errorf("incomplete run: %+v", result.Progress)
			}
			return err
		}},
		{"engine (fixed 64 writers)", func(gvr schema.GroupVersionResource) error {
			_, err := migration.Run(ctx, dyn, migration.Options{Resource: gvr, Config: cfg, Concurrency: 64, FixedConcurrency: true})
			return err
		}},
		{"baseline (1 writer, GET + PUT)", func(gvr schema.GroupVersionResource) error { return getPut(ctx, dyn, gvr) }},
		{"ceiling (64 writers, merge patch)", func(gvr schema.GroupVersionResource) error { return ceiling(ctx, dyn, gvr, 64) }},
	}
	rates := map[string]float64{}
	for i, ct := range contenders {
		gvr, err := population(ctx, c, dyn, fmt.Sprintf("p%d.bench.graduator.io", i), n)
		if err != nil {
			return err
		}
		start := time.Now()
		if err := ct.run(gvr); err != nil {
			return fmt.Errorf("%s: %w", ct.name, err)
		}
		elapsed := time.Since(start)
		rates[ct.name] = float64(n) / elapsed.Seconds()
		fmt.Printf("%-42s %8.0f objects/s  (%s)\n", ct.name, rates[ct.name], elapsed.Round(time.Millisecond))
	}
	engine, uncapped := rates[contenders[0].name], rates[contenders[1].name]
	baseline, ceil := rates[contenders[2].name], rates[contenders[3].name]
	fmt.Printf("\nengine (defaults) / baseline: %.2fx    engine (defaults) / ceiling: %.0f%%\n", engine/baseline, 100*engine/ceil)
	fmt.Printf("engine (fixed 64) / baseline: %.2fx    engine (fixed 64) / ceiling: %.0f%%\n", uncapped/baseline, 100*uncapped/ceil)

	kubeconfig, err := writeKubeconfig(env)
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(filepath.Dir(kubeconfig)) }()
	var rss []int64
	for i, size := range []int{n, n * rssFactor} {
		group := fmt.Sprintf("rss%d.bench.graduator.io", i)
		if _, err := population(ctx, c, dyn, group, size); err != nil {
			return err
		}
		peak, err := childPeakRSS(kubeconfig, group)
		if err != nil {
			return err
		}
		rss = append(rss, peak)
		fmt.Printf("\npeak RSS of the engine's process migrating %7d objects: %6.1f MiB", size, float64(peak)/1024)
	}
	fmt.Printf("\npeak RSS ratio %dxN / N: %.2f\n", rssFactor, float64(rss[1])/float64(rss[0]))
	return nil
}

// population creates a CRD with v1 and v2 of one schema, n objects at v1,
// then switches storage to v2 and returns the resource at v2.
func population(ctx context.Context, c client.Client, dyn dynamic.Interface, group string, n int) (schema.GroupVersionResource, error) {
	crd := envtestutil.WidgetCRD(group, "v1", "v2")
	if err := c.Create(ctx, crd); err != nil {
		return schema.GroupVersionResource{}, err
	}
	v1 := envtestutil.WidgetResource(group, "v1")
	for deadline := time.Now().Add(30 * time.Second); ; {
		if err := envtestutil.Served(ctx, dyn, crd); err == nil {
			break
		} else if time.Now().After(deadline) {
			return v1, err
		}
		time.Sleep(100 * time.Millisecond)
	}
	const creators = 32
	if err := envtestutil.CreateObjects(ctx, dyn, v1, n, creators, func(i int) *unstructured.Unstructured {
		return envtestutil.Widget(v1, "default", fmt.Sprintf("w-%07d", i), map[string]any{
			"color": "blue", "size": int64(i), "notes": "a widget of typical size, with a few words in it",
		})
	}); err != nil {
		return v1, err
	}
	if err := envtestutil.SetStorageVersion(ctx, c, crd.Name, "v2"); err != nil {
		return v1, err
	}
	time.Sleep(2 * time.Second) // let the API server pick up the new storage version
	return envtestutil.WidgetResource(group, "v2"), nil
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
	return eachPage(ctx, dyn, gvr, func(items []unstructured.Unstructured) error {
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(items); i += writers {
					patch := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q}}`, items[i].GetResourceVersion())
					if _, err := dyn.Resource(gvr).Namespace(items[i].GetNamespace()).
						Patch(ctx, items[i].GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		return <-errs
	})
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

func writeKubeconfig(env *envtest.Environment) (string, error) {
	user, err := env.AddUser(envtest.User{Name: "bench", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "graduator-bench-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

// childPeakRSS runs the engine in a child process and returns its peak RSS
// in KiB.
func childPeakRSS(kubeconfig, group string) (int64, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self, "-child-kubeconfig", kubeconfig, "-child-group", group)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return 0, err
	}
	usage, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, fmt.Errorf("no rusage on this platform")
	}
	return usage.Maxrss, nil
}

// child migrates the widgets of group with the engine's defaults (QPS
// uncapped, so the measurement does not take minutes).
func child(kubeconfig, group string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS = -1
	return migrateAll(cfg, group)
}

func migrateAll(cfg *rest.Config, group string) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	result, err := migration.Run(context.Background(), dyn, migration.Options{
		Resource: schema.GroupVersionResource{Group: group, Version: "v2", Resource: "widgets"}, Config: cfg,
	})
	if err != nil {
		return err
	}
	if !result.Complete || result.Failed > 0 {
		return fmt.Errorf("incomplete run: %+v", result.Progress)
	}
	return nil
}

func runtimeProcs() int { return goruntime.GOMAXPROCS(0) }
