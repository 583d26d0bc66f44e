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
	"math"
	"reflect"
	"regexp"
	"sort"
	"strings"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Wildcard stands for every item of a list in a field path: the loss of
// /spec/toppings/0/name and of /spec/toppings/3/name is one loss,
// /spec/toppings/*/name.
const Wildcard = "*"

// PathPattern is the syntax of a field path (see ValidPath).
const PathPattern = `^(/([^/~]|~[01])+)+$`

var pathPattern = regexp.MustCompile(PathPattern)

// contentMetadata is the part of metadata that is the object's content: the
// API server owns the rest (resourceVersion, uid, generation,
// managedFields, creationTimestamp, selfLink...), and name and namespace
// cannot change.
var contentMetadata = map[string]bool{"labels": true, "annotations": true, "ownerReferences": true, "finalizers": true}

// Content is the part of obj that a round trip must keep: obj without
// apiVersion, kind and the server-owned metadata. It shares obj's values.
func Content(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		switch k {
		case "apiVersion", "kind":
		case "metadata":
			meta, _ := v.(map[string]any)
			kept := map[string]any{}
			for mk, mv := range meta {
				if contentMetadata[mk] {
					kept[mk] = mv
				}
			}
			out[k] = kept
		default:
			out[k] = v
		}
	}
	return out
}

// Paths returns the field paths of obj's content (see Content) that carry a
// value, list indices written as Wildcard, each once. Empty maps and lists
// and nulls carry none: a round trip may drop them (a typed webhook's
// omitempty does) without losing anything a client can read.
func Paths(obj map[string]any) []string {
	return sortedKeys(pathSet(obj))
}

// pathSet is the set of Paths, unsorted: a sample counts each object's
// paths in any order.
func pathSet(obj map[string]any) map[string]struct{} {
	set := map[string]struct{}{}
	collect(Content(obj), "", set)
	return set
}

func collect(v any, path string, set map[string]struct{}) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			collect(child, path+"/"+escape(k), set)
		}
	case []any:
		for _, child := range v {
			collect(child, path+"/"+Wildcard, set)
		}
	case nil:
	default:
		set[path] = struct{}{}
	}
}

// pointerEscaper writes a map key as a JSON pointer segment (RFC 6901). One
// for the package: a Replacer is safe for concurrent use, and building one
// for every key of every object was most of the proof's own CPU time
// (docs/benchmarks.md, "Reads as N grows").
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// escape writes a map key as a JSON pointer segment (RFC 6901): an
// annotation key such as example.com/stash stays one segment.
func escape(key string) string {
	if !strings.ContainsAny(key, "~/") {
		return key
	}
	return pointerEscaper.Replace(key)
}

// Compare returns the field paths of a's content (see Content) that b lacks
// or holds another value at: what a round trip from a to b lost. A path is
// the highest one lost (all of /status/conditions gone is
// /status/conditions, not each of its fields), list indices written as
// Wildcard, each once, sorted.
//
// The rule for what comes back absent or different:
//   - A value a holds (a string, a number, a bool, a non-empty list or map)
//     that b lacks or holds another value at is lost, the zero value too: an
//     explicit 0, false or "" that comes back absent is a loss. A client
//     reading the object no longer finds the value it wrote, and where the
//     schema defaults the field to another value (replicas 0 with a default
//     of 1) the API server fills the default on read, so the object changes
//     meaning: a workload scaled to zero comes back at one replica.
//   - An empty list or map or a null of a is no loss when b lacks it or holds
//     it empty or null: a typed client reads the same object, and a round
//     trip through a typed webhook drops them (omitempty). An empty list or a
//     null is a loss when b holds a value there: a default filled on read (a
//     list defaulted to one item) or the conversion put one, and the object
//     changes meaning.
//   - What b adds where a holds nothing (a default, a key added to a map,
//     an empty one too) is no loss.
//   - An annotation whose value is a JSON object or list in both a and b
//     (the fields a conversion keeps for a version that lacks them, such as
//     Cluster API's conversion-data) is compared as JSON: the loss names the
//     paths inside it that differ, under the annotation's path, so accepting
//     the annotation's path accepts them. Equal JSON written differently is
//     a loss of the annotation itself: its bytes changed.
func Compare(a, b map[string]any) []string {
	set := map[string]struct{}{}
	lost(Content(a), Content(b), "", set)
	return sortedKeys(set)
}

func lost(a, b any, path string, set map[string]struct{}) {
	if empty(a) {
		if _, isMap := a.(map[string]any); !isMap && !empty(b) {
			set[path] = struct{}{}
		}
		return
	}
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok {
			set[path] = struct{}{}
			return
		}
		for k, av := range a {
			bv, ok := bm[k]
			if !ok {
				if !empty(av) {
					set[path+"/"+escape(k)] = struct{}{}
				}
				continue
			}
			lost(av, bv, path+"/"+escape(k), set)
		}
	case []any:
		bl, ok := b.([]any)
		if !ok {
			set[path] = struct{}{}
			return
		}
		for i, av := range a {
			if i >= len(bl) {
				if !empty(av) {
					set[path+"/"+Wildcard] = struct{}{}
				}
				continue
			}
			lost(av, bl[i], path+"/"+Wildcard, set)
		}
	default:
		if sameScalar(a, b) {
			return
		}
		if strings.HasPrefix(path, annotationsPath) && !strings.Contains(path[len(annotationsPath):], "/") {
			if inside, ok := lostInJSON(a, b, path); ok {
				for p := range inside {
					set[p] = struct{}{}
				}
				return
			}
		}
		set[path] = struct{}{}
	}
}

// annotationsPath is the path of an object's annotations, with the slash
// before an annotation's key.
const annotationsPath = "/metadata/annotations/"

// lostInJSON compares two annotation values as JSON when both are a JSON
// object or list, and returns the paths under path that a loses; ok is
// false when they are not both JSON or nothing inside differs.
func lostInJSON(a, b any, path string) (map[string]struct{}, bool) {
	as, _ := a.(string)
	bs, _ := b.(string)
	var aj, bj any
	if !jsonDocument(as, &aj) || !jsonDocument(bs, &bj) {
		return nil, false
	}
	set := map[string]struct{}{}
	lost(aj, bj, path, set)
	return set, len(set) > 0
}

// jsonDocument decodes s into v when s is a JSON object or list, numbers as
// the API machinery decodes them.
func jsonDocument(s string, v *any) bool {
	s = strings.TrimSpace(s)
	if s == "" || s[0] != '{' && s[0] != '[' {
		return false
	}
	return utiljson.Unmarshal([]byte(s), v) == nil
}

// empty reports whether v carries no value: nil, an empty map or list.
func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

// sameScalar compares JSON scalars; a number is the same whether it was
// decoded as an integer or a float (3 and 3.0).
func sameScalar(a, b any) bool {
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && (x == y || math.IsNaN(x) && math.IsNaN(y))
	}
	return reflect.DeepEqual(a, b)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	case float32:
		return float64(n), true
	}
	return 0, false
}

// Accepts reports whether the loss of path is accepted by one of the
// patterns: a pattern accepts its own path and every path under it, and
// Wildcard in a pattern stands for any one segment (a list item or a map
// key).
func Accepts(patterns []string, path string) bool {
	segs := strings.Split(path, "/")
	for _, p := range patterns {
		pattern := strings.Split(strings.TrimSuffix(p, "/"), "/")
		if len(pattern) > len(segs) {
			continue
		}
		match := true
		for i, s := range pattern {
			if s != Wildcard && s != segs[i] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

func sortedKeys(set map[string]struct{}) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ValidPath reports whether path is a field path as Compare writes them
// and acceptLoss takes them: one or more segments, each after a "/", none
// empty, "~" only as in "~0" (~) and "~1" (/). CRDVersionPolicy's CEL rule
// for spec.migration.acceptLoss is the same expression.
func ValidPath(path string) bool {
	return pathPattern.MatchString(path)
}
