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

package robustness_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/graduator/graduator/snapshot"
	"github.com/graduator/graduator/test/pizzaenv"
)

// clientAnnotation carries the concurrent client's counter.
const clientAnnotation = "robustness.graduator.io/counter"

// outcome is what the client knows of a create or a delete it sent: sent
// without an answer it trusts (it may or may not have landed), or acked.
type outcome int

const (
	sent outcome = iota
	acked
)

// counter is the client's writes to one object: the last value it sent and
// the last one the API server acknowledged.
type counter struct{ sent, acked int64 }

// concurrentClient creates, updates and deletes pizzas through v1beta1 for
// the whole run, and records every write, keyed by namespace/name. It owns
// every 5th pizza of the population and those it creates; it touches no
// other object.
type concurrentClient struct {
	owned    []string
	template map[string]any

	mu      sync.Mutex
	updates map[string]*counter
	created map[string]outcome
	deleted map[string]outcome

	cancel context.CancelFunc
	done   chan struct{}
}

func startClient(ctx context.Context, seed uint64, every time.Duration) *concurrentClient {
	c := &concurrentClient{
		updates: map[string]*counter{}, created: map[string]outcome{}, deleted: map[string]outcome{},
		done: make(chan struct{}),
	}
	for i := 0; i < size.Objects; i += 5 {
		c.owned = append(c.owned, pizzaenv.SampleV1alpha1(i).Name)
	}
	model, err := dyn.Resource(pizzaenv.Resource(newVersion)).Namespace("default").Get(ctx, c.owned[0], metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	c.template = model.Object["spec"].(map[string]any)
	runCtx, cancel := context.WithCancel(ctx)
	c.cancel = cancel
	DeferCleanup(c.stop)
	go c.run(runCtx, rand.New(rand.NewPCG(seed, 7)), every)
	return c
}

func (c *concurrentClient) run(ctx context.Context, r *rand.Rand, every time.Duration) {
	defer GinkgoRecover()
	defer close(c.done)
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		switch op := r.IntN(10); {
		case op < 6:
			c.update(ctx, c.owned[r.IntN(len(c.owned))])
		case op < 8:
			c.create(ctx, fmt.Sprintf("client-%05d", n))
		default:
			// At most a third of the owned pizzas go.
			if c.deletions() < len(c.owned)/3 {
				c.delete(ctx, c.owned[r.IntN(len(c.owned))])
			}
		}
	}
}

func key(name string) string { return "default/" + name }

func (c *concurrentClient) resource() interface {
	Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*unstructured.Unstructured, error)
} {
	return dyn.Resource(pizzaenv.Resource(newVersion)).Namespace("default")
}

func (c *concurrentClient) update(ctx context.Context, name string) {
	c.mu.Lock()
	if _, gone := c.deleted[key(name)]; gone {
		c.mu.Unlock()
		return
	}
	w := c.updates[key(name)]
	if w == nil {
		w = &counter{}
		c.updates[key(name)] = w
	}
	w.sent++
	value := w.sent
	c.mu.Unlock()
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, clientAnnotation, strconv.FormatInt(value, 10))
	reqCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.resource().Patch(reqCtx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err == nil {
		c.mu.Lock()
		w.acked = max(w.acked, value)
		c.mu.Unlock()
	}
}

func (c *concurrentClient) create(ctx context.Context, name string) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": pizzaGroup + "/" + newVersion, "kind": "Pizza",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     c.template,
	}}
	c.mu.Lock()
	c.created[key(name)] = sent
	c.mu.Unlock()
	reqCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := dyn.Resource(pizzaenv.Resource(newVersion)).Namespace("default").Create(reqCtx, obj, metav1.CreateOptions{}); err == nil {
		c.mu.Lock()
		c.created[key(name)] = acked
		c.mu.Unlock()
	}
}

func (c *concurrentClient) delete(ctx context.Context, name string) {
	c.mu.Lock()
	if _, gone := c.deleted[key(name)]; gone {
		c.mu.Unlock()
		return
	}
	c.deleted[key(name)] = sent
	c.mu.Unlock()
	reqCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := dyn.Resource(pizzaenv.Resource(newVersion)).Namespace("default").Delete(reqCtx, name, metav1.DeleteOptions{}); err == nil {
		c.mu.Lock()
		c.deleted[key(name)] = acked
		c.mu.Unlock()
	}
}

func (c *concurrentClient) deletions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.deleted)
}

func (c *concurrentClient) stop() {
	c.cancel()
	<-c.done
}

// touched is how many objects the client sent a write to.
func (c *concurrentClient) touched() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	all := map[string]bool{}
	for k := range c.updates {
		all[k] = true
	}
	for k := range c.created {
		all[k] = true
	}
	for k := range c.deleted {
		all[k] = true
	}
	return len(all)
}

// unaccounted compares the cluster with the snapshot taken before the run
// and with the client's record: every difference must be a write of the
// client, and every write the client saw acknowledged must be there.
func (c *concurrentClient) unaccounted(ctx context.Context, before *snapshot.Snapshot) []string {
	diffs, err := before.Verify(ctx, dyn)
	Expect(err).NotTo(HaveOccurred())
	list, err := dyn.Resource(pizzaenv.Resource(newVersion)).Namespace("default").List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	live := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		live[key(list.Items[i].GetName())] = &list.Items[i]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, d := range diffs {
		if why := c.explains(d); why != "" {
			out = append(out, fmt.Sprintf("%s %s: %s", d.Object, d.What, why))
		}
	}
	for _, k := range sortedKeys(c.updates) {
		w := c.updates[k]
		obj, ok := live[k]
		if !ok {
			if _, deleted := c.deleted[k]; !deleted {
				out = append(out, k+": updated by the client, never deleted, and gone")
			}
			continue
		}
		v, _ := strconv.ParseInt(obj.GetAnnotations()[clientAnnotation], 10, 64)
		if v < w.acked || v > w.sent {
			out = append(out, fmt.Sprintf("%s: counter %d, last acknowledged %d, last sent %d", k, v, w.acked, w.sent))
		}
	}
	for _, k := range sortedKeys(c.created) {
		if _, ok := live[k]; c.created[k] == acked && !ok {
			out = append(out, k+": created (acknowledged) and gone")
		}
	}
	for _, k := range sortedKeys(c.deleted) {
		if _, ok := live[k]; c.deleted[k] == acked && ok {
			out = append(out, k+": deleted (acknowledged) and still there")
		}
	}
	return out
}

// explains returns "" when the client's writes account for the
// difference, and why not otherwise.
func (c *concurrentClient) explains(d snapshot.Difference) string {
	switch d.What {
	case snapshot.Missing:
		if _, ok := c.deleted[d.Object]; ok {
			return ""
		}
		return "gone, and the client never deleted it"
	case snapshot.Added:
		if _, ok := c.created[d.Object]; ok {
			return ""
		}
		return "appeared, and the client never created it"
	}
	if _, ok := c.updates[d.Object]; !ok {
		return fmt.Sprintf("changed, and the client never wrote it: %v", d.Changes)
	}
	for _, ch := range d.Changes {
		if !strings.HasPrefix(ch.Path, "/metadata/annotations") {
			return fmt.Sprintf("changed beyond the client's annotation: %s", ch)
		}
	}
	return ""
}
