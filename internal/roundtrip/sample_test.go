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
	"fmt"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// names are the names of the sample's objects.
func names(s *Sample) []string {
	var out []string
	for _, o := range s.Objects() {
		out = append(out, o.GetName())
	}
	return out
}

func scaler(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Scaler",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     spec,
	}}
}

// Every object carries the same paths; three of 3,000 hold a value a
// lossy conversion drops (a zero, a false, an enum value its switch
// misses). Each of the three is kept: a sample of paths keeps one object.
func TestSampleKeepsRareValues(t *testing.T) {
	s := NewSample()
	for i := range 3000 {
		spec := map[string]any{"replicas": int64(3), "paused": true, "tier": "gold"}
		switch i {
		case 1000:
			spec["replicas"] = int64(0)
		case 2000:
			spec["paused"] = false
		case 2999:
			spec["tier"] = "legacy"
		}
		s.Add(scaler(fmt.Sprintf("s-%04d", i), spec))
	}
	got := names(s)
	for _, want := range []string{"s-1000", "s-2000", "s-2999"} {
		if !slices.Contains(got, want) {
			t.Errorf("the sample %v lacks %s", got, want)
		}
	}
	if len(got) > 4 {
		t.Errorf("kept %d objects %v, want the first and the three", len(got), got)
	}
}

func TestSampleClasses(t *testing.T) {
	for _, tc := range []struct {
		name string
		// specs are listed in order, named o-0, o-1...
		specs []map[string]any
		want  []string
	}{
		{name: "one object covers a path's single value",
			specs: []map[string]any{{"x": "a"}, {"x": "a"}, {"x": "a"}}, want: []string{"o-0"}},
		{name: "an empty string", specs: []map[string]any{{"x": "a"}, {"x": "b"}, {"x": ""}}, want: []string{"o-0", "o-1", "o-2"}},
		{name: "an explicit null", specs: []map[string]any{{"x": "a"}, {"x": "a"}, {"x": nil}}, want: []string{"o-0", "o-2"}},
		{name: "an empty list, one item, more",
			specs: []map[string]any{{"l": []any{"a", "a"}}, {"l": []any{"a", "a"}}, {"l": []any{}}, {"l": []any{"a"}}},
			want:  []string{"o-0", "o-2", "o-3"}},
		{name: "an empty map",
			specs: []map[string]any{{"m": map[string]any{"k": "v"}}, {"m": map[string]any{"k": "v"}}, {"m": map[string]any{}}},
			want:  []string{"o-0", "o-2"}},
		{name: "the longest list holds the record, one that held only the record it lost is dropped",
			specs: []map[string]any{{"l": []any{"a", "a"}}, {"l": []any{"a", "a", "a"}}, {"l": []any{"a", "a", "a", "a"}}, {"l": []any{"a"}}},
			want:  []string{"o-0", "o-2", "o-3"}},
		{name: "a value that is not new is not kept",
			specs: []map[string]any{{"n": int64(1)}, {"n": int64(2)}, {"n": int64(1)}, {"n": int64(2)}}, want: []string{"o-0", "o-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSample()
			for i, spec := range tc.specs {
				s.Add(scaler(fmt.Sprintf("o-%d", i), spec))
			}
			if got := names(s); !slices.Equal(got, tc.want) {
				t.Errorf("kept %v, want %v", got, tc.want)
			}
		})
	}
}

// A path with many values keeps maxValuesPerPath of them and the
// extremes, whatever the population: memory is bounded by the classes.
func TestSampleBounded(t *testing.T) {
	s := NewSample()
	for i := range 10000 {
		s.Add(scaler(fmt.Sprintf("o-%05d", i), map[string]any{
			"n":    int64(i),                             // a new largest number each time
			"name": strings.Repeat("x", 1+i%50),          // longest string beaten 49 times
			"list": make([]any, i%7),                     // longest list beaten 6 times
			"id":   fmt.Sprintf("id-%d", (i*7919)%10000), // a new value each time
		}))
	}
	got := names(s)
	if len(got) > maxValuesPerPath+3 {
		t.Errorf("kept %d objects, want at most %d: %v", len(got), maxValuesPerPath+3, got)
	}
	if !slices.Contains(got, "o-09999") || !slices.Contains(got, "o-00000") {
		t.Errorf("the sample %v lacks the largest (o-09999) or the smallest (o-00000) n", got)
	}
	if s.Listed != 10000 || s.Carriers["/spec/n"] != 10000 {
		t.Errorf("listed %d, /spec/n carried by %d", s.Listed, s.Carriers["/spec/n"])
	}
}

// BenchmarkSample measures the sample's pass over a synthetic population
// shaped as the round-trip suites' Scalers (a few enum-like values, counts,
// a free-form name, a list of varying length): ns/op, B/op and allocs/op
// are per pass over the population, ns/object per object added, kept/op
// the objects kept. "paths" is the field-path count alone (what the pass
// costs with RoundTripProof: Every, before the round trips), beside
// "classes", the default sample.
func BenchmarkSample(b *testing.B) {
	for _, n := range []int{6000, 100000, 1000000} {
		population := make([]*unstructured.Unstructured, n)
		tiers := []string{"gold", "silver", "bronze"}
		for i := range population {
			population[i] = scaler(fmt.Sprintf("s-%06d", i), map[string]any{
				"replicas": int64(1 + i%5),
				"paused":   i%2 == 0,
				"tier":     tiers[i%len(tiers)],
				"owner":    fmt.Sprintf("team-%d", i),
				"ports":    make([]any, i%4),
			})
		}
		for _, mode := range []string{"classes", "paths"} {
			b.Run(fmt.Sprintf("%s/objects=%d", mode, n), func(b *testing.B) {
				b.ReportAllocs()
				kept := 0
				for b.Loop() {
					s := NewSample()
					s.countOnly = mode == "paths"
					for _, o := range population {
						s.Add(o)
					}
					kept = len(s.Objects())
				}
				b.ReportMetric(float64(kept), "kept/op")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/object")
			})
		}
	}
}

// An enum the schema declares with more values than a path keeps
// (maxValuesPerPath): the one object holding a late value is kept all the
// same, and so is the first object holding each form of an int-or-string.
func TestSampleKeepsEachDeclaredEnumValueAndEachForm(t *testing.T) {
	regions := make([]apiextensionsv1.JSON, 40)
	for i := range regions {
		regions[i] = apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf("%q", fmt.Sprintf("region-%02d", i)))}
	}
	schema := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"region": {Type: "string", Enum: regions},
			"port":   {XIntOrString: true},
		}},
	}}
	enums := DeclaredEnums(schema)
	if got := len(enums["/spec/region"]); got != 40 {
		t.Fatalf("DeclaredEnums: %d values at /spec/region, want 40", got)
	}
	build := func(s *Sample) {
		for i := range 3000 {
			spec := map[string]any{"region": fmt.Sprintf("region-%02d", i%30), "port": int64(8080)}
			switch i {
			case 1234:
				spec["region"] = "region-37"
			case 2345:
				spec["port"] = "http"
			}
			s.Add(scaler(fmt.Sprintf("s-%04d", i), spec))
		}
	}
	s := NewSampleFor(enums)
	build(s)
	for _, want := range []string{"s-1234", "s-2345"} {
		if !slices.Contains(names(s), want) {
			t.Errorf("the sample with the schema's enums does not keep %s: %v", want, names(s))
		}
	}
	// Without the schema, the path overflows its 16 values first: the
	// one object with region-37 is not kept, which is why Every is the
	// default.
	plain := NewSample()
	build(plain)
	if slices.Contains(names(plain), "s-1234") {
		t.Errorf("without the schema the sample kept s-1234; the spec above proves nothing")
	}
}
