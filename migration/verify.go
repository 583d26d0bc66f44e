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

package migration

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Snapshot is the content of every object of a resource, read at one
// version, for proving that a migration changed nothing. It holds every
// object in memory: use it in tests and on resources of modest size.
type Snapshot struct {
	resource schema.GroupVersionResource
	objects  map[string]map[string]any
}

// Difference is an object whose content differs between a Snapshot and now.
type Difference struct {
	// Object is "namespace/name" or "name".
	Object string
	// What differs: "missing", "added" or "changed".
	What string
}

func (d Difference) String() string { return d.Object + ": " + d.What }

// TakeSnapshot reads every object of the resource (at resource.Version).
func TakeSnapshot(ctx context.Context, c dynamic.Interface, resource schema.GroupVersionResource) (*Snapshot, error) {
	objects, err := readContent(ctx, c, resource)
	if err != nil {
		return nil, err
	}
	return &Snapshot{resource: resource, objects: objects}, nil
}

// Len is the number of objects in the snapshot.
func (s *Snapshot) Len() int { return len(s.objects) }

// Verify reads every object again and returns those whose content differs,
// ignoring what a rewrite legitimately changes: metadata.resourceVersion,
// metadata.managedFields and metadata.generation. Objects created or deleted
// meanwhile are reported as "added" or "missing".
func (s *Snapshot) Verify(ctx context.Context, c dynamic.Interface) ([]Difference, error) {
	now, err := readContent(ctx, c, s.resource)
	if err != nil {
		return nil, err
	}
	var diffs []Difference
	for key, before := range s.objects {
		after, ok := now[key]
		switch {
		case !ok:
			diffs = append(diffs, Difference{Object: key, What: "missing"})
		case !equality.Semantic.DeepEqual(before, after):
			diffs = append(diffs, Difference{Object: key, What: "changed"})
		}
	}
	for key := range now {
		if _, ok := s.objects[key]; !ok {
			diffs = append(diffs, Difference{Object: key, What: "added"})
		}
	}
	sort.Slice(diffs, func(i, j int) bool { return diffs[i].Object < diffs[j].Object })
	return diffs, nil
}

func readContent(ctx context.Context, c dynamic.Interface, resource schema.GroupVersionResource) (map[string]map[string]any, error) {
	out := map[string]map[string]any{}
	continueToken := ""
	for {
		list, err := c.Resource(resource).List(ctx, metav1.ListOptions{Limit: DefaultPageSize, Continue: continueToken})
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", resource, err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			out[objectKey(obj)] = comparable(obj)
		}
		continueToken = list.GetContinue()
		if continueToken == "" {
			return out, nil
		}
	}
}

// comparable drops the fields a no-op rewrite may change.
func comparable(obj *unstructured.Unstructured) map[string]any {
	c := obj.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(c.Object, "metadata", "managedFields")
	unstructured.RemoveNestedField(c.Object, "metadata", "generation")
	return c.Object
}
