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
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
)

// listPageSizes are the LIST page sizes the listpages section compares: the
// engine's and the proof's default, and larger ones.
var listPageSizes = []int64{500, 2000, 5000}

// listPages times one paged LIST of every object at each N of -scale-ns and
// each page size, as the engine reads them (metadata only: the main pass and
// the catch-up sweep) and as the round-trip proof reads them (whole objects).
// etcd counts the keys left in the range for every page it serves, so a
// pass of N objects in pages of P walks about N*N/(2P) index entries: this
// section shows what that costs at the N measured.
func (b *bench) listPages(ctx context.Context) error {
	meta, err := metadata.NewForConfig(b.cfg)
	if err != nil {
		return err
	}
	for _, n := range b.opts.scaleNs {
		if err := b.listPagesAt(ctx, meta, n); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) listPagesAt(ctx context.Context, meta metadata.Interface, n int) (err error) {
	fmt.Printf("\n-- N=%d --\n", n)
	b.groups++
	v1, err := b.widgetCRD(ctx, fmt.Sprintf("p%d.bench.graduator.io", b.groups))
	if err != nil {
		return err
	}
	defer func() {
		if dropErr := b.dropPopulation(ctx, v1); dropErr != nil && err == nil {
			err = dropErr
		}
	}()
	if err := b.createMany(ctx, v1, n); err != nil {
		return err
	}
	readers := []struct {
		what string
		list func(context.Context, metav1.ListOptions) (int, string, error)
	}{
		{"metadata", func(ctx context.Context, o metav1.ListOptions) (int, string, error) {
			l, err := meta.Resource(v1).List(ctx, o)
			if err != nil {
				return 0, "", err
			}
			return len(l.Items), l.Continue, nil
		}},
		{"whole objects", func(ctx context.Context, o metav1.ListOptions) (int, string, error) {
			l, err := b.dyn.Resource(v1).List(ctx, o)
			if err != nil {
				return 0, "", err
			}
			return len(l.Items), l.GetContinue(), nil
		}},
	}
	for _, r := range readers {
		for _, size := range listPageSizes {
			took, err := listAll(ctx, v1, n, size, r.list)
			if err != nil {
				return fmt.Errorf("list %s in pages of %d: %w", r.what, size, err)
			}
			fmt.Printf("%-42s %8.0f objects/s  (%s)\n", fmt.Sprintf("LIST %s, pages of %d", r.what, size),
				rate(n, took), took.Round(time.Millisecond))
		}
	}
	return nil
}

// listAll pages through every object of gvr and checks it saw n.
func listAll(ctx context.Context, gvr schema.GroupVersionResource, n int, size int64,
	list func(context.Context, metav1.ListOptions) (int, string, error)) (time.Duration, error) {
	start := time.Now()
	seen, token := 0, ""
	for {
		got, next, err := list(ctx, metav1.ListOptions{Limit: size, Continue: token})
		if err != nil {
			return 0, err
		}
		seen += got
		if token = next; token == "" {
			break
		}
	}
	if seen != n {
		return 0, fmt.Errorf("listed %d widgets of %s, want %d", seen, gvr.Group, n)
	}
	return time.Since(start), nil
}
