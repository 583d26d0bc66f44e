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

// A schema rule compares one node of a version's old schema with the same
// node of its new schema. path is the node's JSON path from the object's
// root, ^: ^.spec.toppings[*].name.
type schemaCheck func(path string, old, n *apiextensionsv1.JSONSchemaProps) []Finding

// schemaRule makes a CRD rule of a schema rule: it walks the old schema of
// every version the new CRD keeps side by side with the new one, below
// nodes whose type did not change (nothing below those compares
// meaningfully: typeChanged reports them).
func schemaRule(check schemaCheck) func(old, n *apiextensionsv1.CustomResourceDefinition) []Finding {
	return func(old, n *apiextensionsv1.CustomResourceDefinition) []Finding {
		var out []Finding
		eachSchemaNode(old, n, func(version, path string, o, nn *apiextensionsv1.JSONSchemaProps) bool {
			if o.Type != nn.Type && o.Type != "" {
				return false
			}
			for _, f := range check(path, o, nn) {
				f.Version = version
				out = append(out, f)
			}
			return true
		})
		return out
	}
}

// eachSchemaNode calls visit with each node pair of each version's old and
// new schema, from the root down, while visit returns true.
func eachSchemaNode(old, n *apiextensionsv1.CustomResourceDefinition,
	visit func(version, path string, old, n *apiextensionsv1.JSONSchemaProps) bool) {
	if old == nil || n == nil {
		return
	}
	var walk func(version, path string, o, nn *apiextensionsv1.JSONSchemaProps)
	walk = func(version, path string, o, nn *apiextensionsv1.JSONSchemaProps) {
		if !visit(version, path, o, nn) {
			return
		}
		for _, name := range sortedKeys(o.Properties) {
			op := o.Properties[name]
			if np, ok := nn.Properties[name]; ok {
				walk(version, path+"."+name, &op, &np)
			}
		}
		if o.Items != nil && o.Items.Schema != nil && nn.Items != nil && nn.Items.Schema != nil {
			walk(version, path+"[*]", o.Items.Schema, nn.Items.Schema)
		}
		if o.AdditionalProperties != nil && o.AdditionalProperties.Schema != nil &&
			nn.AdditionalProperties != nil && nn.AdditionalProperties.Schema != nil {
			walk(version, path+"[*]", o.AdditionalProperties.Schema, nn.AdditionalProperties.Schema)
		}
	}
	for i := range old.Spec.Versions {
		ov := &old.Spec.Versions[i]
		o, nn := schemaOf(ov), schemaOf(version(n, ov.Name))
		if o != nil && nn != nil {
			walk(ov.Name, "^", o, nn)
		}
	}
}

// at is a finding of a schema rule at path.
func at(path, format string, args ...any) Finding {
	return Finding{Path: path, Message: path + ": " + fmt.Sprintf(format, args...)}
}

// typeChanged reports a node whose type changed; nothing below it is
// compared.
func typeChanged(old, n *apiextensionsv1.CustomResourceDefinition) []Finding {
	var out []Finding
	eachSchemaNode(old, n, func(version, path string, o, nn *apiextensionsv1.JSONSchemaProps) bool {
		if o.Type != nn.Type && o.Type != "" {
			f := at(path, "type changed from %s to %s", o.Type, orAny(nn.Type))
			f.Version = version
			out = append(out, f)
			return false
		}
		return true
	})
	return out
}

func propertyRemoved(path string, old, n *apiextensionsv1.JSONSchemaProps) []Finding {
	if isTrue(n.XPreserveUnknownFields) {
		return nil
	}
	var out []Finding
	for _, name := range sortedKeys(old.Properties) {
		if _, ok := n.Properties[name]; !ok {
			child := path + "." + name
			out = append(out, Finding{Path: child, Message: fmt.Sprintf("%s is removed: its data is pruned from stored objects", child)})
		}
	}
	return out
}

func requiredAdded(path string, old, n *apiextensionsv1.JSONSchemaProps) []Finding {
	var out []Finding
	for _, r := range n.Required {
		if !slices.Contains(old.Required, r) {
			out = append(out, Finding{Path: path + "." + r,
				Message: fmt.Sprintf("%s.%s is now required: existing objects without it fail validation", path, r)})
		}
	}
	return out
}

func enumRestricted(path string, old, n *apiextensionsv1.JSONSchemaProps) []Finding {
	if len(n.Enum) == 0 {
		return nil
	}
	if len(old.Enum) == 0 {
		return []Finding{at(path, "an enum %s is added", enumText(n.Enum))}
	}
	var removed []apiextensionsv1.JSON
	for _, v := range old.Enum {
		if !slices.ContainsFunc(n.Enum, func(w apiextensionsv1.JSON) bool { return string(w.Raw) == string(v.Raw) }) {
			removed = append(removed, v)
		}
	}
	if len(removed) == 0 {
		return nil
	}
	return []Finding{at(path, "enum values %s are removed", enumText(removed))}
}

func defaultChanged(path string, old, n *apiextensionsv1.JSONSchemaProps) []Finding {
	if equality.Semantic.DeepEqual(old.Default, n.Default) {
		return nil
	}
	return []Finding{at(path, "default changed from %s to %s", jsonText(old.Default), jsonText(n.Default))}
}

// boundTightened reports every bound that is new or stricter.
func boundTightened(path string, old, n *apiextensionsv1.JSONSchemaProps) []Finding {
	var out []Finding
	lower := func(name string, o, nv *float64) {
		if nv != nil && (o == nil || *nv > *o) {
			out = append(out, at(path, "%s tightened from %s to %g", name, floatText(o), *nv))
		}
	}
	upper := func(name string, o, nv *float64) {
		if nv != nil && (o == nil || *nv < *o) {
			out = append(out, at(path, "%s tightened from %s to %g", name, floatText(o), *nv))
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
		out = append(out, at(path, "exclusiveMinimum is added"))
	}
	if n.ExclusiveMaximum && !old.ExclusiveMaximum {
		out = append(out, at(path, "exclusiveMaximum is added"))
	}
	return out
}

func patternChanged(path string, old, n *apiextensionsv1.JSONSchemaProps) []Finding {
	if n.Pattern == "" || n.Pattern == old.Pattern {
		return nil
	}
	return []Finding{at(path, "pattern changed from %q to %q", old.Pattern, n.Pattern)}
}

func nullableRemoved(path string, old, n *apiextensionsv1.JSONSchemaProps) []Finding {
	if !old.Nullable || n.Nullable {
		return nil
	}
	return []Finding{at(path, "nullable is removed")}
}

func validationRuleAdded(path string, old, n *apiextensionsv1.JSONSchemaProps) []Finding {
	var out []Finding
	for _, rule := range n.XValidations {
		if !slices.ContainsFunc(old.XValidations, func(r apiextensionsv1.ValidationRule) bool { return r.Rule == rule.Rule }) {
			out = append(out, at(path, "validation rule %q is added", rule.Rule))
		}
	}
	return out
}

func listTypeChanged(path string, old, n *apiextensionsv1.JSONSchemaProps) []Finding {
	if ptrText(old.XListType) == ptrText(n.XListType) && slices.Equal(old.XListMapKeys, n.XListMapKeys) {
		return nil
	}
	return []Finding{at(path, "list type changed from %s %v to %s %v", ptrText(old.XListType), old.XListMapKeys, ptrText(n.XListType), n.XListMapKeys)}
}

func preserveUnknownFieldsRemoved(path string, old, n *apiextensionsv1.JSONSchemaProps) []Finding {
	if !isTrue(old.XPreserveUnknownFields) || isTrue(n.XPreserveUnknownFields) {
		return nil
	}
	return []Finding{at(path, "x-kubernetes-preserve-unknown-fields is removed: unknown fields are pruned")}
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
