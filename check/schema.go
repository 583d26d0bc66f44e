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

package check

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// compareSchemas walks the old schema of a version and the new one side by
// side and reports what an existing object of the old schema may no longer
// satisfy. Paths start at ^, the object's root: ^.spec.toppings[*].name.
func compareSchemas(old, n *apiextensionsv1.JSONSchemaProps) []Finding {
	if old == nil || n == nil {
		return nil
	}
	var out []Finding
	walk(&out, "^", old, n)
	return out
}

func walk(out *[]Finding, path string, old, n *apiextensionsv1.JSONSchemaProps) {
	f := func(rule, format string, args ...any) {
		*out = append(*out, Finding{Rule: rule, Path: path, Message: path + ": " + fmt.Sprintf(format, args...)})
	}
	if old.Type != n.Type && old.Type != "" {
		f("type-changed", "type changed from %s to %s", old.Type, orAny(n.Type))
		return // nothing below compares meaningfully
	}
	for _, r := range n.Required {
		if !slices.Contains(old.Required, r) {
			*out = append(*out, Finding{Rule: "required-added", Path: path + "." + r,
				Message: fmt.Sprintf("%s.%s is now required: existing objects without it fail validation", path, r)})
		}
	}
	compareEnum(f, old.Enum, n.Enum)
	if !equality.Semantic.DeepEqual(old.Default, n.Default) {
		f("default-changed", "default changed from %s to %s", jsonText(old.Default), jsonText(n.Default))
	}
	compareBounds(f, old, n)
	if n.Pattern != "" && n.Pattern != old.Pattern {
		f("pattern-changed", "pattern changed from %q to %q", old.Pattern, n.Pattern)
	}
	if old.Nullable && !n.Nullable {
		f("nullable-removed", "nullable is removed")
	}
	for _, rule := range n.XValidations {
		if !slices.ContainsFunc(old.XValidations, func(r apiextensionsv1.ValidationRule) bool { return r.Rule == rule.Rule }) {
			f("validation-rule-added", "validation rule %q is added", rule.Rule)
		}
	}
	if ptrText(old.XListType) != ptrText(n.XListType) || !slices.Equal(old.XListMapKeys, n.XListMapKeys) {
		f("list-type-changed", "list type changed from %s %v to %s %v", ptrText(old.XListType), old.XListMapKeys, ptrText(n.XListType), n.XListMapKeys)
	}
	if isTrue(old.XPreserveUnknownFields) && !isTrue(n.XPreserveUnknownFields) {
		f("preserve-unknown-fields-removed", "x-kubernetes-preserve-unknown-fields is removed: unknown fields are pruned")
	}

	for _, name := range sortedKeys(old.Properties) {
		o := old.Properties[name]
		np, ok := n.Properties[name]
		child := path + "." + name
		if !ok {
			if !isTrue(n.XPreserveUnknownFields) {
				*out = append(*out, Finding{Rule: "property-removed", Path: child,
					Message: fmt.Sprintf("%s is removed: its data is pruned from stored objects", child)})
			}
			continue
		}
		walk(out, child, &o, &np)
	}
	if old.Items != nil && old.Items.Schema != nil && n.Items != nil && n.Items.Schema != nil {
		walk(out, path+"[*]", old.Items.Schema, n.Items.Schema)
	}
	if old.AdditionalProperties != nil && old.AdditionalProperties.Schema != nil &&
		n.AdditionalProperties != nil && n.AdditionalProperties.Schema != nil {
		walk(out, path+"[*]", old.AdditionalProperties.Schema, n.AdditionalProperties.Schema)
	}
}

func compareEnum(f func(rule, format string, args ...any), old, n []apiextensionsv1.JSON) {
	if len(n) == 0 {
		return
	}
	if len(old) == 0 {
		f("enum-restricted", "an enum %s is added", enumText(n))
		return
	}
	var removed []apiextensionsv1.JSON
	for _, v := range old {
		if !slices.ContainsFunc(n, func(w apiextensionsv1.JSON) bool { return string(w.Raw) == string(v.Raw) }) {
			removed = append(removed, v)
		}
	}
	if len(removed) > 0 {
		f("enum-restricted", "enum values %s are removed", enumText(removed))
	}
}

// compareBounds reports every bound that is new or stricter.
func compareBounds(f func(rule, format string, args ...any), old, n *apiextensionsv1.JSONSchemaProps) {
	lower := func(name string, o, nv *float64) {
		if nv != nil && (o == nil || *nv > *o) {
			f("bound-tightened", "%s tightened from %s to %g", name, floatText(o), *nv)
		}
	}
	upper := func(name string, o, nv *float64) {
		if nv != nil && (o == nil || *nv < *o) {
			f("bound-tightened", "%s tightened from %s to %g", name, floatText(o), *nv)
		}
	}
	lower("minimum", old.Minimum, n.Minimum)
	upper("maximum", old.Maximum, n.Maximum)
	lower("minLength", intAsFloat(old.MinLength), intAsFloat(n.MinLength))
	upper("maxLength", intAsFloat(old.MaxLength), intAsFloat(n.MaxLength))
	lower("minItems", intAsFloat(old.MinItems), intAsFloat(n.MinItems))
	upper("maxItems", intAsFloat(old.MaxItems), intAsFloat(n.MaxItems))
	lower("minProperties", intAsFloat(old.MinProperties), intAsFloat(n.MinProperties))
	upper("maxProperties", intAsFloat(old.MaxProperties), intAsFloat(n.MaxProperties))
	if n.ExclusiveMinimum && !old.ExclusiveMinimum {
		f("bound-tightened", "exclusiveMinimum is added")
	}
	if n.ExclusiveMaximum && !old.ExclusiveMaximum {
		f("bound-tightened", "exclusiveMaximum is added")
	}
}

// propertyPaths lists every property path of a schema.
func propertyPaths(s *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	var visit func(path string, s *apiextensionsv1.JSONSchemaProps)
	visit = func(path string, s *apiextensionsv1.JSONSchemaProps) {
		if s == nil {
			return
		}
		for _, name := range sortedKeys(s.Properties) {
			p := s.Properties[name]
			out = append(out, path+"."+name)
			visit(path+"."+name, &p)
		}
		if s.Items != nil {
			visit(path+"[*]", s.Items.Schema)
		}
	}
	visit("^", s)
	return out
}

func symmetricDifference(a, b []string) []string {
	var out []string
	for _, p := range a {
		if !slices.Contains(b, p) {
			out = append(out, p)
		}
	}
	for _, p := range b {
		if !slices.Contains(a, p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func sortedKeys(m map[string]apiextensionsv1.JSONSchemaProps) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func intAsFloat(i *int64) *float64 {
	if i == nil {
		return nil
	}
	f := float64(*i)
	return &f
}

func floatText(f *float64) string {
	if f == nil {
		return "none"
	}
	return fmt.Sprintf("%g", *f)
}

func ptrText(s *string) string {
	if s == nil {
		return "(unset)"
	}
	return *s
}

func isTrue(b *bool) bool { return b != nil && *b }

func orAny(t string) string {
	if t == "" {
		return "any"
	}
	return t
}

func jsonText(v *apiextensionsv1.JSON) string {
	if v == nil {
		return "none"
	}
	return string(v.Raw)
}

func enumText(values []apiextensionsv1.JSON) string {
	texts := make([]json.RawMessage, 0, len(values))
	for _, v := range values {
		texts = append(texts, v.Raw)
	}
	data, _ := json.Marshal(texts)
	return string(data)
}
