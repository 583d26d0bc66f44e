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
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
)

func obj(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return normalize(m).(map[string]any)
}

// normalize turns encoding/json's float64 integers into int64, as the
// API machinery's decoder returns them.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			v[k] = normalize(c)
		}
	case []any:
		for i, c := range v {
			v[i] = normalize(c)
		}
	case float64:
		if v == float64(int64(v)) {
			return int64(v)
		}
	}
	return v
}

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b string
		want []string
	}{
		{name: "identical", a: `{"spec":{"x":"1"}}`, b: `{"spec":{"x":"1"}}`},
		{name: "a field missing is lost", a: `{"spec":{"x":"1","rare":"r"}}`, b: `{"spec":{"x":"1"}}`, want: []string{"/spec/rare"}},
		{name: "a field changed is lost", a: `{"spec":{"x":"1"}}`, b: `{"spec":{"x":"2"}}`, want: []string{"/spec/x"}},
		{name: "a type changed is lost", a: `{"spec":{"x":{"y":"1"}}}`, b: `{"spec":{"x":"1"}}`, want: []string{"/spec/x"}},
		{name: "a default added is no loss", a: `{"spec":{"x":"1"}}`, b: `{"spec":{"x":"1","replicas":1},"status":{}}`},
		{name: "a whole subtree lost is its top path",
			a: `{"status":{"conditions":[{"type":"Ready","status":"True"}]}}`, b: `{"status":{}}`, want: []string{"/status/conditions"}},
		{name: "list items are one wildcard path",
			a: `{"spec":{"parts":[{"name":"a","n":1},{"name":"b","n":2}]}}`, b: `{"spec":{"parts":[{"name":"a"},{"name":"b"}]}}`,
			want: []string{"/spec/parts/*/n"}},
		{name: "items dropped from a list", a: `{"spec":{"tags":["a","b","c"]}}`, b: `{"spec":{"tags":["a"]}}`, want: []string{"/spec/tags/*"}},
		{name: "items reordered", a: `{"spec":{"tags":["a","b"]}}`, b: `{"spec":{"tags":["b","a"]}}`, want: []string{"/spec/tags/*"}},
		{name: "an integer read back as a float is the same", a: `{"spec":{"n":3}}`, b: `{"spec":{"n":3.0}}`},
		{name: "empty maps, lists and nulls dropped are no loss", a: `{"spec":{"m":{},"l":[],"z":null,"x":"1"}}`, b: `{"spec":{"x":"1"}}`},
		{name: "server-owned metadata is not content",
			a: `{"apiVersion":"g/v1","kind":"K","metadata":{"name":"a","resourceVersion":"1","uid":"u","generation":1,"managedFields":[{"manager":"m"}],"creationTimestamp":"2026-01-01T00:00:00Z","selfLink":"/x"}}`,
			b: `{"apiVersion":"g/v1","kind":"K","metadata":{"name":"a","resourceVersion":"2","uid":"u","generation":2}}`},
		{name: "labels, annotations, owners and finalizers are content",
			a:    `{"metadata":{"labels":{"l":"1"},"annotations":{"example.com/a":"1"},"ownerReferences":[{"uid":"o"}],"finalizers":["f"]}}`,
			b:    `{"metadata":{}}`,
			want: []string{"/metadata/annotations", "/metadata/finalizers", "/metadata/labels", "/metadata/ownerReferences"}},
		{name: "an explicit zero that comes back absent is lost", a: `{"spec":{"replicas":0,"x":"1"}}`, b: `{"spec":{"x":"1"}}`,
			want: []string{"/spec/replicas"}},
		{name: "a zero that comes back as the schema's default is lost", a: `{"spec":{"replicas":0}}`, b: `{"spec":{"replicas":1}}`,
			want: []string{"/spec/replicas"}},
		{name: "a false that comes back absent is lost", a: `{"spec":{"paused":false,"x":"1"}}`, b: `{"spec":{"x":"1"}}`,
			want: []string{"/spec/paused"}},
		{name: "an empty string that comes back absent is lost", a: `{"spec":{"note":"","x":"1"}}`, b: `{"spec":{"x":"1"}}`,
			want: []string{"/spec/note"}},
		{name: "an empty list or map that comes back empty is no loss", a: `{"spec":{"l":[],"m":{}}}`, b: `{"spec":{"l":[],"m":{}}}`},
		{name: "an empty list or a null that comes back defaulted is lost",
			a: `{"spec":{"l":[],"z":null}}`, b: `{"spec":{"l":["default"],"z":"default"}}`,
			want: []string{"/spec/l", "/spec/z"}},
		{name: "keys added to an empty map are no loss (a default, an annotation the conversion keeps)",
			a: `{"metadata":{},"spec":{"m":{}}}`, b: `{"metadata":{"annotations":{"example.com/stash":"{}"}},"spec":{"m":{"k":"v"}}}`},
		{name: "an enum value that comes back absent is lost", a: `{"spec":{"tier":"legacy","x":"1"}}`, b: `{"spec":{"x":"1"}}`,
			want: []string{"/spec/tier"}},
		{name: "a JSON annotation names the paths inside it that differ",
			a:    `{"metadata":{"annotations":{"example.com/conversion-data":"{\"spec\":{\"a\":1,\"b\":[{\"c\":\"x\"}],\"d\":\"same\"}}"}}}`,
			b:    `{"metadata":{"annotations":{"example.com/conversion-data":"{\"spec\":{\"a\":2,\"b\":[{}],\"d\":\"same\"}}"}}}`,
			want: []string{"/metadata/annotations/example.com~1conversion-data/spec/a", "/metadata/annotations/example.com~1conversion-data/spec/b/*/c"}},
		{name: "a JSON annotation gone is the annotation",
			a:    `{"metadata":{"annotations":{"example.com/conversion-data":"{\"a\":1}","k":"v"}}}`,
			b:    `{"metadata":{"annotations":{"k":"v"}}}`,
			want: []string{"/metadata/annotations/example.com~1conversion-data"}},
		{name: "a JSON annotation rewritten with the same content is the annotation",
			a:    `{"metadata":{"annotations":{"example.com/conversion-data":"{\"a\":1, \"b\":2}"}}}`,
			b:    `{"metadata":{"annotations":{"example.com/conversion-data":"{\"b\":2,\"a\":1}"}}}`,
			want: []string{"/metadata/annotations/example.com~1conversion-data"}},
		{name: "an annotation that is not JSON is the annotation",
			a:    `{"metadata":{"annotations":{"example.com/a":"{not json"}}}`,
			b:    `{"metadata":{"annotations":{"example.com/a":"{"}}}`,
			want: []string{"/metadata/annotations/example.com~1a"}},
		{name: "a JSON string outside annotations is one value",
			a: `{"spec":{"config":"{\"a\":1}"}}`, b: `{"spec":{"config":"{\"a\":2}"}}`, want: []string{"/spec/config"}},
		{name: "a key with a slash is one escaped segment",
			a: `{"metadata":{"annotations":{"example.com/a":"1","b":"2"}}}`, b: `{"metadata":{"annotations":{"b":"2"}}}`,
			want: []string{"/metadata/annotations/example.com~1a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Compare(obj(t, tc.a), obj(t, tc.b))
			if diff := cmp.Diff(tc.want, got, cmpEmpty); diff != "" {
				t.Errorf("Compare() (-want +got):\n%s", diff)
			}
		})
	}
}

var cmpEmpty = cmp.Comparer(func(x, y []string) bool {
	if len(x) == 0 && len(y) == 0 {
		return true
	}
	return cmp.Equal([]string(x), []string(y))
})

func TestPaths(t *testing.T) {
	got := Paths(obj(t, `{"apiVersion":"g/v1","kind":"K","metadata":{"name":"a","uid":"u","labels":{"l":"1"}},
		"spec":{"x":"1","parts":[{"name":"a"},{"name":"b","n":2}],"empty":{},"tags":[]},"status":{"ok":true}}`))
	want := []string{"/metadata/labels/l", "/spec/parts/*/n", "/spec/parts/*/name", "/spec/x", "/status/ok"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Paths() (-want +got):\n%s", diff)
	}
}

// A key with a slash or a tilde is one segment of a path, escaped as
// RFC 6901 says, whether the sample counts it or a loss names it.
func TestPathsEscapeKeys(t *testing.T) {
	o := obj(t, `{"metadata":{"annotations":{"example.com/stash":"x","plain":"y"}},"spec":{"a~b":{"c/d~e":1}}}`)
	want := []string{"/metadata/annotations/example.com~1stash", "/metadata/annotations/plain", "/spec/a~0b/c~1d~0e"}
	if diff := cmp.Diff(want, Paths(o)); diff != "" {
		t.Errorf("Paths() (-want +got):\n%s", diff)
	}
	s := NewSample()
	s.Add(&unstructured.Unstructured{Object: o})
	for _, p := range want {
		if s.Carriers[p] != 1 {
			t.Errorf("the sample counted %q %d times, want once: %v", p, s.Carriers[p], s.Carriers)
		}
	}
}

func TestAccepts(t *testing.T) {
	for _, tc := range []struct {
		patterns []string
		path     string
		want     bool
	}{
		{[]string{"/spec/rare"}, "/spec/rare", true},
		{[]string{"/spec/rare"}, "/spec/rarely", false},
		{[]string{"/status"}, "/status/conditions/*/reason", true},
		{[]string{"/spec/rare"}, "/spec", false},
		{[]string{"/spec/parts/*/n"}, "/spec/parts/*/n", true},
		{[]string{"/metadata/annotations/*"}, "/metadata/annotations/example.com~1a", true},
		{nil, "/spec/x", false},
		{[]string{"/metadata/annotations/example.com~1conversion-data"}, "/metadata/annotations/example.com~1conversion-data/spec/a", true},
	} {
		if got := Accepts(tc.patterns, tc.path); got != tc.want {
			t.Errorf("Accepts(%q, %q) = %v, want %v", tc.patterns, tc.path, got, tc.want)
		}
	}
}

func TestValidPath(t *testing.T) {
	for path, want := range map[string]bool{
		"/spec/rare": true, "/spec/parts/*/name": true, "/metadata/annotations/example.com~1a": true, "/a~0b": true,
		"": false, "/": false, "spec/rare": false, "/spec//rare": false, "/spec/rare/": false, "/a~2": false,
	} {
		if got := ValidPath(path); got != want {
			t.Errorf("ValidPath(%q) = %v, want %v", path, got, want)
		}
	}
}

func TestSampleCoversEveryPath(t *testing.T) {
	s := NewSample()
	kept := 0
	for i := range 5000 {
		spec := `{"spec":{"color":"red","size":1}}`
		switch {
		case i == 4321:
			spec = `{"spec":{"color":"red","size":1,"rare":"only me"}}`
		case i%100 == 7:
			spec = `{"spec":{"color":"red","parts":[{"name":"p"}]}}`
		}
		u := unstructuredOf(t, spec)
		if s.Add(u) {
			kept++
		}
	}
	if s.Listed != 5000 || kept != 3 || len(s.Objects()) != 3 {
		t.Fatalf("listed %d, kept %d (%d objects), want 5000 and 3", s.Listed, kept, len(s.Objects()))
	}
	if s.Carriers["/spec/rare"] != 1 || s.Carriers["/spec/parts/*/name"] != 50 || s.Paths() != 4 {
		t.Errorf("carriers %v", s.Carriers)
	}
}

func TestMessage(t *testing.T) {
	r := Result{Kind: "CronJob", Target: "v2", Versions: []VersionResult{{
		Version: "v1", Sampled: 54, Paths: 9,
		Losses: []Loss{{Path: "/status/conditions", Objects: 54, Examples: []string{"default/a", "default/b"}}},
	}}}
	want := "v1 -> v2 -> v1 loses /status/conditions on 54 of 54 sampled CronJobs (default/a, default/b)"
	if got := r.Message(); got != want || r.Lossless() {
		t.Errorf("Message() = %q (lossless %v), want %q", got, r.Lossless(), want)
	}
	r.Versions[0].Accepted, r.Versions[0].Losses = r.Versions[0].Losses, nil
	want = "v1 -> v2 -> v1 keeps all 9 field paths of 54 sampled CronJobs but the accepted /status/conditions on 54 of 54 sampled CronJobs (default/a, default/b)"
	if got := r.Message(); got != want || !r.Lossless() {
		t.Errorf("Message() = %q (lossless %v), want %q", got, r.Lossless(), want)
	}
	for kind, want := range map[string]string{"Policy": "Policies", "Gateway": "Gateways", "Box": "Boxes", "Pizza": "Pizzas"} {
		if got := plural(kind); got != want {
			t.Errorf("plural(%q) = %q, want %q", kind, got, want)
		}
	}
}

func unstructuredOf(t *testing.T, s string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: obj(t, s)}
}

func TestStatus(t *testing.T) {
	r := Result{Target: "v2", Source: SourceWebhook, Every: true, Versions: []VersionResult{
		{Version: "v1", Sampled: 3, Paths: 5, Accepted: []Loss{{Path: "/spec/rare", Objects: 1, Carriers: 31, Examples: []string{"ns/a"}}}},
		{Version: "v1beta1", Sampled: 2, Paths: 4, Losses: []Loss{{Path: "/spec/x", Objects: 2, Carriers: 2, Examples: []string{"ns/b", "ns/c"}}}},
	}}
	now := metav1.Now()
	got := r.Status(7, now)
	want := graduatorv1alpha1.RoundTripStatus{CRDGeneration: 7, Target: "v2", Source: "Webhook", Scope: "Every", Versions: []string{"v1", "v1beta1"},
		Sampled: 5, Paths: 9, Lossless: false, ProvedAt: &now,
		Losses:   []graduatorv1alpha1.FieldLoss{{Path: "/spec/x", Version: "v1beta1", Objects: 2, Carriers: 2, Examples: []string{"ns/b", "ns/c"}}},
		Accepted: []graduatorv1alpha1.FieldLoss{{Path: "/spec/rare", Version: "v1", Objects: 1, Carriers: 31, Examples: []string{"ns/a"}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Status() (-want +got):\n%s", diff)
	}
}

func TestCarriersUnder(t *testing.T) {
	carriers := map[string]int{"/status/phase": 7, "/status/conditions/*/type": 5, "/metadata/annotations/example.com~1data": 3}
	for path, want := range map[string]int{
		"/status/phase": 7,
		"/status":       7, // above the carried paths: the most under it
		"/metadata/annotations/example.com~1data/spec/x": 3, // inside a carried JSON annotation
		"/spec/other": 0,
	} {
		if got := carriersUnder(carriers, path); got != want {
			t.Errorf("carriersUnder(%q) = %d, want %d", path, got, want)
		}
	}
}
