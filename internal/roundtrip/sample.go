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
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/graduator/graduator/internal/paging"
)

// maxValuesPerPath bounds the distinct values a sample covers at one
// path. A path with this many values or fewer is enum-like (a tier, a
// phase, a mode, a small count): a conversion's switch that forgets one of
// its cases loses only the objects holding that value, so each value needs
// an object of its own. Sixteen is above the cases of the enums Kubernetes
// APIs and the CRDs we prove carry, and it costs little on a path with many
// values: the first sixteen values of every such path are mostly held by the
// same first objects listed.
const maxValuesPerPath = 16

// Sample is a set of objects that together carry every value class found
// in a population of objects (see Add), and what the pass over them saw.
type Sample struct {
	// Listed is the number of objects the pass saw.
	Listed int
	// Carriers is, for each field path (see Paths), how many of the listed
	// objects carry it.
	Carriers map[string]int

	// kept are the objects kept, in the order they were listed; nil where
	// an object kept for a record (the largest number, the longest string,
	// the longest list) lost it to a later one and brings nothing else.
	kept []*unstructured.Unstructured
	// refs counts the classes each kept object holds.
	refs []int
	// classes are the classes seen at each path (of a leaf, a list or a map,
	// list indices written as Wildcard).
	classes map[string]*classes

	// countOnly counts paths without keeping objects (every object is
	// proven, page by page).
	countOnly bool
	// enums are the values the schema declares at each path that has an
	// enum (numbers as float64): each is a class of its own, however many
	// values the path holds.
	enums map[string]map[any]struct{}
}

// classes are the value classes seen at one path, each held by one kept
// object.
type classes struct {
	// zero ("", 0, false), null, an empty list or map, a list or map of one
	// item: held by the first object that brought them.
	zero, null, empty, one bool
	// values are the distinct values seen while there were no more than
	// maxValuesPerPath; overflow when there were more (the path is not
	// enum-like).
	values   map[any]struct{}
	overflow bool
	// declared are the values of the schema's enum seen at the path.
	declared map[any]struct{}
	// types are the JSON types seen (typeString, typeNumber, typeBool):
	// both forms of an int-or-string are two classes.
	types uint8
	// min and max numbers, the longest string, the longest list or map:
	// held by the last object that beat the record.
	min, max, longest record
	// counted is the Listed of the last object counted as a carrier.
	counted int
}

// record is the extreme seen at a path and the index of the kept object
// holding it.
type record struct {
	set    bool
	value  float64
	holder int
}

// NewSample returns an empty sample.
func NewSample() *Sample {
	return &Sample{Carriers: map[string]int{}, classes: map[string]*classes{}}
}

// NewSampleFor returns an empty sample that also keeps an object for each
// value of an enum the schema declares (see DeclaredEnums).
func NewSampleFor(enums map[string]map[any]struct{}) *Sample {
	s := NewSample()
	s.enums = enums
	return s
}

// The JSON types of classes.types.
const (
	typeString uint8 = 1 << iota
	typeNumber
	typeBool
)

// Add counts obj's paths and keeps obj when it brings a value class no kept
// object brings; it reports whether it kept it. The classes of a path: its
// zero value ("", 0, false), an explicit null, each distinct value while
// the path holds no more than maxValuesPerPath of them, the smallest and the
// largest number, the longest string, and for a list or a map empty, one
// item, the most items. A record (smallest, largest, longest) is held by
// one object, the last to beat it, so memory stays bounded by the classes,
// not by the population. Add keeps obj itself, not a copy: the caller does
// not change it afterwards.
func (s *Sample) Add(obj *unstructured.Unstructured) bool {
	s.Listed++
	if s.countOnly {
		for p := range pathSet(obj.Object) {
			s.Carriers[p]++
		}
		return false
	}
	idx := len(s.kept)
	s.refs = append(s.refs, 0)
	s.visit(Content(obj.Object), "", idx)
	if s.refs[idx] == 0 {
		s.refs = s.refs[:idx]
		return false
	}
	// A new Unstructured around obj's content: obj may be an item of a
	// page, and a pointer to it would keep the whole page.
	s.kept = append(s.kept, &unstructured.Unstructured{Object: obj.Object})
	return true
}

// Objects are the objects kept, in the order they were listed.
func (s *Sample) Objects() []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(s.kept))
	for _, o := range s.kept {
		if o != nil {
			out = append(out, o)
		}
	}
	return out
}

// Paths is the number of distinct field paths seen.
func (s *Sample) Paths() int { return len(s.Carriers) }

// visit notes the classes v brings at path for the object at index idx.
func (s *Sample) visit(v any, path string, idx int) {
	var c *classes
	if path != "" {
		if c = s.classes[path]; c == nil {
			c = &classes{counted: -1}
			s.classes[path] = c
		}
	}
	switch v := v.(type) {
	case map[string]any:
		if c != nil {
			s.container(c, len(v), idx)
		}
		for k, child := range v {
			s.visit(child, path+"/"+escape(k), idx)
		}
	case []any:
		if c != nil {
			s.container(c, len(v), idx)
		}
		for _, child := range v {
			s.visit(child, path+"/"+Wildcard, idx)
		}
	case nil:
		if c != nil && !c.null {
			c.null = true
			s.refs[idx]++
		}
	default:
		if c.counted != s.Listed {
			c.counted = s.Listed
			s.Carriers[path]++
		}
		s.scalar(c, v, idx, s.enums[path])
	}
}

// container notes a list or a map of n items.
func (s *Sample) container(c *classes, n, idx int) {
	switch {
	case n == 0 && !c.empty:
		c.empty = true
		s.refs[idx]++
	case n == 1 && !c.one:
		c.one = true
		s.refs[idx]++
	}
	s.beat(&c.longest, float64(n), idx, func(n, best float64) bool { return n > best })
}

// scalar notes a string, a number or a bool; declared is the schema's
// enum at its path, if any.
func (s *Sample) scalar(c *classes, v any, idx int, declared map[any]struct{}) {
	if isZero(v) && !c.zero {
		c.zero = true
		s.refs[idx]++
	}
	if t := jsonType(v); t != 0 && c.types&t == 0 {
		c.types |= t
		s.refs[idx]++
	}
	if key := enumKey(v); declared != nil {
		if _, ok := declared[key]; ok {
			if _, seen := c.declared[key]; !seen {
				if c.declared == nil {
					c.declared = map[any]struct{}{}
				}
				c.declared[key] = struct{}{}
				s.refs[idx]++
			}
		}
	}
	if !c.overflow {
		if _, seen := c.values[v]; !seen {
			if len(c.values) == maxValuesPerPath {
				c.overflow, c.values = true, nil
			} else {
				if c.values == nil {
					c.values = map[any]struct{}{}
				}
				c.values[v] = struct{}{}
				s.refs[idx]++
			}
		}
	}
	if str, ok := v.(string); ok {
		s.beat(&c.longest, float64(len(str)), idx, func(n, best float64) bool { return n > best })
	} else if n, ok := number(v); ok {
		s.beat(&c.min, n, idx, func(n, best float64) bool { return n < best })
		s.beat(&c.max, n, idx, func(n, best float64) bool { return n > best })
	}
}

// beat makes the object at idx the holder of r when value beats r's (or r
// is not set), releasing the previous holder, which is dropped from the
// sample when it holds nothing else.
func (s *Sample) beat(r *record, value float64, idx int, better func(n, best float64) bool) {
	if r.set && !better(value, r.value) {
		return
	}
	if r.set {
		s.refs[r.holder]--
		if r.holder != idx && s.refs[r.holder] == 0 {
			s.kept[r.holder] = nil
		}
	}
	*r = record{set: true, value: value, holder: idx}
	s.refs[idx]++
}

// jsonType is v's JSON type among the scalars.
func jsonType(v any) uint8 {
	switch v.(type) {
	case string:
		return typeString
	case bool:
		return typeBool
	}
	if _, ok := number(v); ok {
		return typeNumber
	}
	return 0
}

// enumKey is v as a key of an enum's values: numbers as float64, whatever
// their Go type.
func enumKey(v any) any {
	if n, ok := number(v); ok {
		return n
	}
	return v
}

// DeclaredEnums are the values of each enum the schema declares, by field
// path (Wildcard for list items; a map's keys are not followed), numbers as
// float64.
func DeclaredEnums(schema *apiextensionsv1.JSONSchemaProps) map[string]map[any]struct{} {
	out := map[string]map[any]struct{}{}
	var walk func(p *apiextensionsv1.JSONSchemaProps, path string)
	walk = func(p *apiextensionsv1.JSONSchemaProps, path string) {
		if p == nil {
			return
		}
		if len(p.Enum) > 0 && path != "" {
			values := map[any]struct{}{}
			for _, e := range p.Enum {
				var v any
				if json.Unmarshal(e.Raw, &v) == nil {
					values[enumKey(v)] = struct{}{}
				}
			}
			out[path] = values
		}
		for name, child := range p.Properties {
			walk(&child, path+"/"+escape(name))
		}
		if p.Items != nil {
			walk(p.Items.Schema, path+"/"+Wildcard)
		}
	}
	walk(schema, "")
	return out
}

// isZero reports a JSON scalar's zero value: "", 0, false.
func isZero(v any) bool {
	switch v := v.(type) {
	case string:
		return v == ""
	case bool:
		return !v
	}
	n, ok := number(v)
	return ok && n == 0
}

// TakeSample makes one paged pass over the objects of objects (a resource
// at one version) and returns a sample covering every value class present
// (see Sample.Add). Memory holds one page and the kept objects, at most one
// per class.
func TakeSample(ctx context.Context, objects dynamic.ResourceInterface, pageSize int64) (*Sample, error) {
	return takeSample(ctx, NewSample(), objects, pageSize)
}

func takeSample(ctx context.Context, s *Sample, objects dynamic.ResourceInterface, pageSize int64) (*Sample, error) {
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
	return pager(objects, pageSize).EachPage(ctx, "", func(list *unstructured.UnstructuredList) error {
		return fn(list.Items)
	})
}

// eachPageAhead is eachPage with the next page read while fn handles this
// one (paging.Pager.EachPageAhead): the proof of every object converts a
// page while the API server answers the next LIST, so the conversions hide
// behind the read.
func eachPageAhead(ctx context.Context, objects dynamic.ResourceInterface, pageSize int64, fn func([]unstructured.Unstructured) error) error {
	return pager(objects, pageSize).EachPageAhead(ctx, func(list *unstructured.UnstructuredList) error {
		return fn(list.Items)
	})
}

// pager pages through objects; a 410 without a continue token to go on
// from ends the listing with it.
func pager(objects dynamic.ResourceInterface, pageSize int64) paging.Pager[*unstructured.UnstructuredList] {
	return paging.Pager[*unstructured.UnstructuredList]{
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
}
