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

package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/access"
)

// redrawAfter is the debounce of --watch: a burst of changes (a migration
// reports every page, a fleet moves many CRDs at once) redraws once.
const redrawAfter = 300 * time.Millisecond

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// watchAndRedraw prints the status, then prints it again whenever a CRD or
// a policy changes, until ctx ends (Ctrl-C), which is a clean exit. On a
// terminal the screen is cleared before each redraw; elsewhere each table
// follows the last.
func (o *StatusOptions) watchAndRedraw(ctx context.Context) error {
	crdChanged, policyChanged := make(chan struct{}, 1), make(chan struct{}, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for gvr, changed := range map[schema.GroupVersionResource]chan struct{}{
		crdResource: crdChanged, graduatorv1alpha1.GroupVersion.WithResource("crdversionpolicies"): policyChanged,
		// An in-tree migration's progress shows in the table too (a server
		// before 1.37 has none: not watched).
		access.StorageVersionMigrations: policyChanged,
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			watchChanges(ctx, o.md, gvr, changed)
		}()
	}
	terminal := isTerminal(o.Out)
	draw := func(first bool) error {
		// Read everything before clearing the screen, so that it never
		// shows half a table.
		var buf bytes.Buffer
		if err := o.print(ctx, &buf); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		switch {
		case terminal:
			_, _ = io.WriteString(o.Out, "\x1b[H\x1b[2J")
		case !first:
			_, _ = io.WriteString(o.Out, "\n")
		}
		if terminal {
			fmt.Fprintf(&buf, "\nEvery change, %s. Ctrl-C to leave.\n", time.Now().Format(time.TimeOnly))
		}
		_, err := o.Out.Write(buf.Bytes())
		return err
	}
	if err := draw(true); err != nil {
		return err
	}
	var debounce <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-crdChanged:
			o.crdsStale = true
			if debounce == nil {
				debounce = time.After(redrawAfter)
			}
		case <-policyChanged:
			if debounce == nil {
				debounce = time.After(redrawAfter)
			}
		case <-debounce:
			debounce = nil
			if err := draw(false); err != nil {
				return err
			}
		}
	}
}

// watchChanges signals changed whenever an object of gvr changes. It
// watches metadata only (a CRD's schema can weigh hundreds of KiB), and
// starts again from a fresh LIST when the watch ends (an expired
// resourceVersion), signalling once more since a change may have been
// missed. A resource that does not exist (no policy CRD installed) is not
// watched.
func watchChanges(ctx context.Context, md metadata.Interface, gvr schema.GroupVersionResource, changed chan<- struct{}) {
	signal := func() {
		select {
		case changed <- struct{}{}:
		default: // a redraw is already due
		}
	}
	for first := true; ctx.Err() == nil; first = false {
		list, err := md.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return
		}
		if err != nil {
			if !sleepCtx(ctx, 2*time.Second) {
				return
			}
			continue
		}
		if !first {
			signal()
		}
		w, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), &cache.ListWatch{
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				return md.Resource(gvr).Watch(ctx, opts)
			},
		})
		if err != nil {
			return
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				break
			}
			signal()
		}
		w.Stop()
		<-w.Done()
	}
}

// sleepCtx waits for d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
