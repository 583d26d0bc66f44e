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

package snapshot

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

var widgets = schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}

// store is a dynamic client whose LISTs of widgets return pageSize objects
// at a time in key order, the index of the next one as the continue token;
// expire says whether a LIST with this token gets 410 Gone.
type store struct {
	dynamic.Interface // nil: only Resource(...).List is used
	mu                sync.Mutex
	objects           map[string]*unstructured.Unstructured
	pageSize          int
	expire            func(token string) bool
	tokens            []string
}

func newStore(pageSize int, keys ...string) *store {
	s := &store{objects: map[string]*unstructured.Unstructured{}, pageSize: pageSize, expire: func(string) bool { return false }}
	for _, k := range keys {
		s.put(k, map[string]any{"color": "blue"})
	}
	return s
}

func (s *store) put(k string, spec map[string]any) {
	ns, name, _ := strings.Cut(k, "/")
	s.mu.Lock()
	defer s.mu.Unlock()
	rv := fmt.Sprint(len(s.tokens) + len(s.objects) + 1)
	s.objects[k] = &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v2", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": ns, "uid": "uid-" + k, "resourceVersion": rv,
			"managedFields": []any{map[string]any{"manager": "m" + rv}}},
		"spec": spec,
	}}
}

func (s *store) delete(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objects, k)
}

func (s *store) Resource(schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return lister{s: s}
}

type lister struct {
	dynamic.NamespaceableResourceInterface
	s *store
}

func (l lister) List(_ context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = append(s.tokens, opts.Continue)
	if s.expire(opts.Continue) {
		return nil, apierrors.NewResourceExpired("the provided continue parameter is too old")
	}
	start := 0
	if opts.Continue != "" {
		_, _ = fmt.Sscan(opts.Continue, &start)
	}
	keys := make([]string, 0, len(s.objects))
	for k := range s.objects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "example.com/v2", "kind": "WidgetList"}}
	end := min(start+s.pageSize, len(keys))
	for _, k := range keys[start:end] {
		list.Items = append(list.Items, *s.objects[k].DeepCopy())
	}
	if end < len(keys) {
		list.SetContinue(fmt.Sprint(end))
	}
	return list, nil
}

func compare(t *testing.T, s *store, data []byte) ([]Difference, Summary) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var diffs []Difference
	sum, err := Compare(context.Background(), s, r, func(d Difference) error {
		diffs = append(diffs, d)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return diffs, sum
}

func TestARewriteThatChangedNothingIsIdentical(t *testing.T) {
	s := newStore(2, "a/w-1", "a/w-2", "b/w-1", "a-b/w-0", "c/w-9")
	var buf bytes.Buffer
	n, err := Write(context.Background(), s, widgets, &buf)
	if err != nil || n != 5 {
		t.Fatalf("Write: %d objects, %v", n, err)
	}
	// A rewrite moves resourceVersion and managedFields, nothing else.
	for _, k := range []string{"a/w-1", "a/w-2", "b/w-1", "a-b/w-0", "c/w-9"} {
		s.put(k, map[string]any{"color": "blue"})
	}
	diffs, sum := compare(t, s, buf.Bytes())
	if len(diffs) != 0 || sum.Identical != 5 || sum.Snapshot != 5 || sum.Cluster != 5 {
		t.Errorf("want 5 identical, got %+v, %v", sum, diffs)
	}
}

func TestEveryDifferenceIsNamedWithItsFields(t *testing.T) {
	s := newStore(2, "a/w-1", "a/w-2", "a/w-3", "b/w-1")
	var buf bytes.Buffer
	if _, err := Write(context.Background(), s, widgets, &buf); err != nil {
		t.Fatal(err)
	}
	s.put("a/w-2", map[string]any{"color": "red"})
	s.delete("a/w-3")
	s.put("a/w-0", map[string]any{"color": "blue"})
	s.put("c/w-1", map[string]any{"color": "blue"})
	diffs, sum := compare(t, s, buf.Bytes())
	var got []string
	for _, d := range diffs {
		got = append(got, d.String())
	}
	want := []string{"a/w-0: added", "a/w-2: changed", "a/w-3: missing", "c/w-1: added"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("differences %v, want %v", got, want)
	}
	if sum.Identical != 2 || sum.Changed != 1 || sum.Missing != 1 || sum.Added != 2 || sum.Differences() != 4 {
		t.Errorf("summary %+v", sum)
	}
	if c := diffs[1].Changes; len(c) != 1 || c[0].String() != `/spec/color: "blue" -> "red"` {
		t.Errorf("changes of a/w-2: %v", c)
	}
}

func TestAnExpiredListingResumesAfterTheLastObjectRead(t *testing.T) {
	s := newStore(2, "default/w-0", "default/w-1", "default/w-2", "default/w-3")
	expired := false
	s.expire = func(token string) bool {
		if token == "2" && !expired {
			expired = true
			// w-1 was read by the first listing and is deleted before the
			// second; w-0b appears before the point the listing resumes at.
			delete(s.objects, "default/w-1")
			return true
		}
		return false
	}
	snap, err := Take(context.Background(), s, widgets)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.tokens, ","); got != ",2,,2" {
		t.Errorf("continue tokens %q: the listing restarts once", got)
	}
	if snap.Len() != 4 {
		t.Errorf("each object once, read by one listing or the other: %d", snap.Len())
	}
	diffs, err := snap.Verify(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) != 1 || diffs[0].String() != "default/w-1: missing" {
		t.Errorf("the object deleted after it was read is missing now: %v", diffs)
	}
}

func TestBadFilesAreRefused(t *testing.T) {
	if _, err := NewReader(strings.NewReader("not gzip")); err == nil {
		t.Error("a file that is not gzip is refused")
	}
	var other bytes.Buffer
	zo := gzip.NewWriter(&other)
	_, _ = zo.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1"}` + "\n"))
	_ = zo.Close()
	want := `not a snapshot: its first record is of kind "ConfigMap", a snapshot's is "GraduatorSnapshot" (written by graduator verify --snapshot)`
	if _, err := NewReader(bytes.NewReader(other.Bytes())); err == nil || err.Error() != want {
		t.Errorf("a gzipped file of another kind says what it is and what was expected:\n got %v\nwant %s", err, want)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte(`{"kind":"GraduatorSnapshot","group":"example.com","version":"v2","resource":"widgets"}` + "\n" +
		`{"namespace":"b","name":"x","object":{}}` + "\n" + `{"namespace":"a","name":"x","object":{}}` + "\n"))
	_ = zw.Close()
	r, err := NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compare(context.Background(), newStore(2), r, func(Difference) error { return nil })
	if !errors.Is(err, ErrOutOfOrder) {
		t.Errorf("records out of order are refused, got %v", err)
	}
	var good bytes.Buffer
	if _, err := Write(context.Background(), newStore(2, "a/x", "b/y"), widgets, &good); err != nil {
		t.Fatal(err)
	}
	cut := good.Bytes()[:good.Len()-6]
	r, err = NewReader(bytes.NewReader(cut))
	if err == nil {
		_, err = Compare(context.Background(), newStore(2, "a/x", "b/y"), r, func(Difference) error { return nil })
	}
	if err == nil {
		t.Error("a file cut short is refused, not read as a shorter snapshot")
	}
}

func TestDiff(t *testing.T) {
	for _, tc := range []struct {
		name, before, after string
		want                []string
	}{
		{"equal", `{"a":1}`, `{"a":1}`, nil},
		{"a field changed", `{"spec":{"color":"blue","size":1}}`, `{"spec":{"color":"red","size":1}}`, []string{`/spec/color: "blue" -> "red"`}},
		{"a field added and one removed", `{"a":1}`, `{"b":2}`, []string{`/a: 1 -> (absent)`, `/b: (absent) -> 2`}},
		{"a list element", `{"l":[1,2,3]}`, `{"l":[1,5,3]}`, []string{`/l/1: 2 -> 5`}},
		{"a list grew", `{"l":[1]}`, `{"l":[1,2]}`, []string{`/l: [1] -> [1,2]`}},
		{"a number's form", `{"n":1}`, `{"n":1.0}`, []string{`/n: 1 -> 1.0`}},
		{"a type changed", `{"n":"1"}`, `{"n":1}`, []string{`/n: "1" -> 1`}},
		{"keys with slashes", `{"metadata":{"annotations":{"a/b":"x"}}}`, `{"metadata":{"annotations":{"a/b":"y"}}}`,
			[]string{`/metadata/annotations/a~1b: "x" -> "y"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changes, err := Diff([]byte(tc.before), []byte(tc.after))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range changes {
				got = append(got, c.String())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
