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
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Change is one field that differs, as a JSON pointer and its JSON values
// before and after; a side without the field has no value.
type Change struct {
	Path   string          `json:"path"`
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
}

func (c Change) String() string {
	return fmt.Sprintf("%s: %s -> %s", c.Path, orAbsent(c.Before), orAbsent(c.After))
}

func orAbsent(v json.RawMessage) string {
	if v == nil {
		return "(absent)"
	}
	return string(v)
}

// Diff returns the fields that differ between two JSON documents, in path
// order. Objects are compared key by key; lists of the same length element
// by element; anything else as a whole.
func Diff(before, after []byte) ([]Change, error) {
	a, err := decode(before)
	if err != nil {
		return nil, err
	}
	b, err := decode(after)
	if err != nil {
		return nil, err
	}
	var changes []Change
	diff("", a, b, true, true, &changes)
	return changes, nil
}

func decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // 1 and 1.0 stay apart, large integers stay exact
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func diff(path string, a, b any, hasA, hasB bool, out *[]Change) {
	if hasA && hasB {
		switch av := a.(type) {
		case map[string]any:
			if bv, ok := b.(map[string]any); ok {
				keys := make([]string, 0, len(av)+len(bv))
				for k := range av {
					keys = append(keys, k)
				}
				for k := range bv {
					if _, ok := av[k]; !ok {
						keys = append(keys, k)
					}
				}
				sort.Strings(keys)
				for _, k := range keys {
					x, okA := av[k]
					y, okB := bv[k]
					diff(path+"/"+escape(k), x, y, okA, okB, out)
				}
				return
			}
		case []any:
			if bv, ok := b.([]any); ok && len(av) == len(bv) {
				for i := range av {
					diff(path+"/"+strconv.Itoa(i), av[i], bv[i], true, true, out)
				}
				return
			}
		}
		if reflect.DeepEqual(a, b) {
			return
		}
	}
	c := Change{Path: path}
	if c.Path == "" {
		c.Path = "/"
	}
	if hasA {
		c.Before = encode(a)
	}
	if hasB {
		c.After = encode(b)
	}
	*out = append(*out, c)
}

// escape escapes a key as a JSON pointer token (RFC 6901).
func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

func encode(v any) json.RawMessage {
	data, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(strconv.Quote(fmt.Sprint(v)))
	}
	return data
}
