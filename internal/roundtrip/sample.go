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

// eachPage lists the objects page by page and calls fn with each page
// (paging.Pager.EachPage: an expired continue token goes on from the one
// its 410 carries, so fn sees each object once). A 410 without one is an
// error: starting again would count objects twice.
func eachPage(ctx context.Context, objects dynamic.ResourceInterface, pageSize int64, fn func([]unstructured.Unstructured) error) error {
	pager := paging.Pager[*unstructured.UnstructuredList]{
		List: func(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
			list, err := objects.List(ctx, opts)
			if err != nil {
				return nil, fmt.Errorf("list: %w", err)
			}
			return list, nil
		},
		Continue: func(l *unstructured.UnstructuredList) string { return l.GetContinue() },
		PageSize: pageSize,
		Restart:  func(expired error) error { return expired },
	}
	return pager.EachPage(ctx, "", func(list *unstructured.UnstructuredList) error {
		return fn(list.Items)
	})
}
