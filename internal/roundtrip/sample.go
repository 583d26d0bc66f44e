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

package roundtrip

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/graduator/graduator/internal/paging"
)

// Sample is a set of objects that together carry every field path found
// in a population of objects, and what the pass over them saw.
type Sample struct {
	// Objects are the objects kept, in the order they were listed: an
	// object is kept when it carries a path no object kept before carries.
	Objects []*unstructured.Unstructured
	// Listed is the number of objects the pass saw.
	Listed int
	// Carriers is, for each field path (see Paths), how many of the listed
	// objects carry it.
	Carriers map[string]int

	// countOnly counts paths without keeping objects (every object is
	// proven, page by page).
	countOnly bool
}

// NewSample returns an empty sample.
func NewSample() *Sample {
	return &Sample{Carriers: map[string]int{}}
}

// Add counts obj's paths and keeps a copy of obj when it carries a path
// not yet covered; it reports whether it kept it.
func (s *Sample) Add(obj *unstructured.Unstructured) bool {
	s.Listed++
	keep := false
	for p := range pathSet(obj.Object) {
		if s.Carriers[p] == 0 {
			keep = true
		}
		s.Carriers[p]++
	}
	if keep && !s.countOnly {
		s.Objects = append(s.Objects, obj.DeepCopy())
	}
	return keep
}

// Paths is the number of distinct field paths seen.
func (s *Sample) Paths() int { return len(s.Carriers) }

// TakeSample makes one paged pass over the objects of objects (a resource
// at one version) and returns a sample covering every field path present.
// Memory holds one page and the kept objects, at most one per path.
func TakeSample(ctx context.Context, objects dynamic.ResourceInterface, pageSize int64) (*Sample, error) {
	s := NewSample()
	err := eachPage(ctx, objects, pageSize, func(page []unstructured.Unstructured) error {
		for i := range page {
			s.Add(&page[i])
		}
		return nil
	})
	return s, err
}

// eachPage lists the objects page by page (Limit and Continue) and calls
// fn with each page. A listing longer than the API server's compaction
// interval (5 minutes: about 1,000,000 small objects) meets an expired
// continue token; it goes on from the token the 410 carries
// (paging.CarriedContinue), so fn sees each object once. A 410 without one
// is an error: starting again would count objects twice, and falling back
// to one full LIST, as client-go's pager may, would hold every object.
func eachPage(ctx context.Context, objects dynamic.ResourceInterface, pageSize int64, fn func([]unstructured.Unstructured) error) error {
	if pageSize <= 0 {
		pageSize = paging.DefaultPageSize
	}
	opts := metav1.ListOptions{Limit: pageSize}
	for expiries := 0; ; {
		list, err := objects.List(ctx, opts)
		if next := paging.CarriedContinue(err); next != "" && opts.Continue != "" && expiries < paging.MaxRestarts {
			expiries++ // in a row: a page served resets it
			opts.Continue = next
			continue
		}
		if err != nil {
			return fmt.Errorf("list: %w", err)
		}
		expiries = 0
		if err := fn(list.Items); err != nil {
			return err
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return nil
		}
	}
}
