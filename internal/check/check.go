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

// Package check tells whether a change of CustomResourceDefinitions is safe
// to ship: the schema rules (a field removed, a type changed, a constraint
// tightened, ...) and the storage rules only a live cluster can answer (a
// version removed while objects are still stored in it). Each rule is a pure
// function over the old and the new CRD; Compare runs them all.
package check

import (
	"fmt"
	"slices"
	"sort"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/graduator/graduator/internal/graduation"
)

// Enforcement is what a finding of a rule does to the verdict.
type Enforcement string

const (
	// Error makes the change unsafe: `graduator check` exits 1.
	Error Enforcement = "error"
	// Warning is reported and does not fail the check.
	Warning Enforcement = "warning"
	// None turns the rule off.
	None Enforcement = "none"
)

// Finding is one thing a rule found. The JSON field names are a contract.
type Finding struct {
	Rule        string      `json:"rule"`
	Enforcement Enforcement `json:"enforcement"`
	CRD         string      `json:"crd"`
	Version     string      `json:"version,omitempty"`
	// Path is the JSON path of the property within the version's schema,
	// such as ^.spec.size; empty for CRD-wide rules.
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
}

// Rule is a named check with its default enforcement.
type Rule struct {
	Name    string
	Default Enforcement
	// Doc says what the rule catches and why it matters.
	Doc string
	// Check is the rule: a pure function over the old and the new CRD of one
	// name, either nil when the CRD is added or removed. Its findings need
	// not name the rule or its enforcement; Compare sets them.
	Check func(old, n *apiextensionsv1.CustomResourceDefinition) []Finding
}

// The rules, by stable name. Config may change their enforcement.
var Rules = []Rule{
	{"crd-removed", Error, "a CRD is removed: the API server deletes every object of it", crdRemoved},
	{"scope-changed", Error, "the scope changed between Namespaced and Cluster: existing objects become unreachable", scopeChanged},
	{"stored-version-removed", Error, "a version still in status.storedVersions is removed: the API server refuses the CRD (only a live cluster knows storedVersions)", storedVersionRemoved},
	{"served-version-removed", Error, "a served version is removed: its clients break", servedVersionRemoved},
	{"storage-version-not-served-before", Error, "the storage version moved to a version the old CRD did not serve: objects written by old clients cannot be read back", storageVersionNotServedBefore},
	{"conversion-strategy-changed", Warning, "the conversion strategy changed", conversionStrategyChanged},
	{"lossy-conversion", Error, "versions have different schemas and conversion None: fields are dropped silently", lossyConversion},
	{"storage-version-unserved", Error, "the storage version is not served", storageVersionUnserved},
	{"printer-column-removed", Warning, "a printer column is removed", printerColumnRemoved},
	{"property-removed", Error, "a property is removed: its data is pruned from stored objects", schemaRule(propertyRemoved)},
	{"type-changed", Error, "a property's type changed: existing objects fail validation", typeChanged},
	{"required-added", Error, "a property became required: existing objects without it fail validation on their next write", schemaRule(requiredAdded)},
	{"enum-restricted", Error, "an enum value is removed, or an enum is added: existing values fail validation", schemaRule(enumRestricted)},
	{"default-changed", Warning, "a default is added, removed or changed: objects read or written later change meaning", schemaRule(defaultChanged)},
	{"bound-tightened", Error, "a minimum, maximum or length/items/properties bound is tightened: existing values fail validation", schemaRule(boundTightened)},
	{"pattern-changed", Error, "a pattern is added or changed: existing values may fail validation", schemaRule(patternChanged)},
	{"nullable-removed", Error, "nullable is removed: stored nulls fail validation", schemaRule(nullableRemoved)},
	{"validation-rule-added", Warning, "an x-kubernetes-validations rule is added (ratcheting spares only unchanged fields)", schemaRule(validationRuleAdded)},
	{"list-type-changed", Error, "x-kubernetes-list-type or x-kubernetes-list-map-keys changed: server-side apply merges differently", schemaRule(listTypeChanged)},
	{"preserve-unknown-fields-removed", Error, "x-kubernetes-preserve-unknown-fields is removed: unknown fields are pruned from stored objects", schemaRule(preserveUnknownFieldsRemoved)},
	{"property-missing-in-served-version", Error, "a property exists in one served version and not in another, with conversion None: it is lost on a round trip", propertyMissingInServedVersion},
}

// Config sets the enforcement of rules by name; rules not named keep their
// default.
type Config struct {
	Enforcement map[string]Enforcement `json:"enforcement"`
}

// enforcement returns the enforcement of a rule under the config.
func (c Config) enforcement(rule string) Enforcement {
	if e, ok := c.Enforcement[rule]; ok {
		return e
	}
	for _, r := range Rules {
		if r.Name == rule {
			return r.Default
		}
	}
	return Error
}

// Validate refuses unknown rule names and enforcements.
func (c Config) Validate() error {
	for name, e := range c.Enforcement {
		if !slices.ContainsFunc(Rules, func(r Rule) bool { return r.Name == name }) {
			return fmt.Errorf("unknown rule %q in the config", name)
		}
		if e != Error && e != Warning && e != None {
			return fmt.Errorf("rule %s: enforcement %q must be error, warning or none", name, e)
		}
	}
	return nil
}

// Compare checks every CRD of newCRDs against the one of the same name in
// oldCRDs with every rule. A CRD only in old is removed; one only in new is
// added, which is safe in itself (only its served versions are checked
// against each other). Findings whose enforcement is None are left out. The
// result is sorted by CRD, version, path and rule.
func Compare(oldCRDs, newCRDs map[string]*apiextensionsv1.CustomResourceDefinition, cfg Config) []Finding {
	names := map[string]bool{}
	for name := range oldCRDs {
		names[name] = true
	}
	for name := range newCRDs {
		names[name] = true
	}
	var findings []Finding
	for name := range names {
		old, n := oldCRDs[name], newCRDs[name]
		for _, r := range Rules {
			enforcement := cfg.enforcement(r.Name)
			if enforcement == None {
				continue
			}
			for _, f := range r.Check(old, n) {
				f.Rule, f.Enforcement, f.CRD = r.Name, enforcement, name
				findings = append(findings, f)
			}
		}
	}
	sort.SliceStable(findings, func(i, j int) bool {
		a, b := findings[i], findings[j]
		if a.CRD != b.CRD {
			return a.CRD < b.CRD
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.Rule < b.Rule
	})
	return findings
}

// Unsafe reports whether any finding is at error level.
func Unsafe(findings []Finding) bool {
	return slices.ContainsFunc(findings, func(f Finding) bool { return f.Enforcement == Error })
}

// finding is a finding of a CRD-wide rule.
func finding(version, format string, args ...any) Finding {
	return Finding{Version: version, Message: fmt.Sprintf(format, args...)}
}

func crdRemoved(old, n *apiextensionsv1.CustomResourceDefinition) []Finding {
	if old == nil || n != nil {
		return nil
	}
	return []Finding{finding("", "%s is removed: the API server deletes every %s with it", old.Name, old.Spec.Names.Plural)}
}

func scopeChanged(old, n *apiextensionsv1.CustomResourceDefinition) []Finding {
	if old == nil || n == nil || old.Spec.Scope == n.Spec.Scope {
		return nil
	}
	return []Finding{finding("", "scope changed from %s to %s", old.Spec.Scope, n.Spec.Scope)}
}

func storedVersionRemoved(old, n *apiextensionsv1.CustomResourceDefinition) []Finding {
	if old == nil || n == nil {
		return nil
	}
	var out []Finding
	for _, v := range old.Status.StoredVersions {
		switch {
		case version(n, v) != nil:
		case version(old, v) != nil && version(old, v).Storage:
			// Every object is stored in it: migrating has nothing to do.
			out = append(out, finding(v, "%s is removed but status.storedVersions still lists it: the API server refuses the CRD; it is the storage version, so every object must first be rewritten in a version the new CRD keeps (graduator prepare --against the release does it)", v))
		default:
			out = append(out, finding(v, "%s is removed but status.storedVersions still lists it: the API server refuses the CRD; migrate the objects and prune storedVersions first (graduator migrate %s --prune)", v, n.Name))
		}
	}
	return out
}

func servedVersionRemoved(old, n *apiextensionsv1.CustomResourceDefinition) []Finding {
	if old == nil || n == nil {
		return nil
	}
	var out []Finding
	for _, ov := range old.Spec.Versions {
		if ov.Served && version(n, ov.Name) == nil {
			out = append(out, finding(ov.Name, "%s is removed while it is served: its clients break; stop serving it in an earlier release", ov.Name))
		}
	}
	return out
}

func storageVersionNotServedBefore(old, n *apiextensionsv1.CustomResourceDefinition) []Finding {
	if old == nil || n == nil {
		return nil
	}
	storage := storageVersion(n)
	if ov := version(old, storage); storage == "" || storage == storageVersion(old) || (ov != nil && ov.Served) {
		return nil
	}
	return []Finding{finding(storage, "the storage version becomes %s, which the old CRD did not serve: objects written by old clients cannot be read back during the rollout", storage)}
}

func storageVersionUnserved(old, n *apiextensionsv1.CustomResourceDefinition) []Finding {
	if old == nil || n == nil {
		return nil
	}
	storage := storageVersion(n)
	if nv := version(n, storage); storage == "" || nv == nil || nv.Served {
		return nil
	}
	return []Finding{finding(storage, "the storage version %s is not served", storage)}
}

func conversionStrategyChanged(old, n *apiextensionsv1.CustomResourceDefinition) []Finding {
	if old == nil || n == nil || strategy(old) == strategy(n) {
		return nil
	}
	return []Finding{finding("", "the conversion strategy changed from %s to %s", strategy(old), strategy(n))}
}

func printerColumnRemoved(old, n *apiextensionsv1.CustomResourceDefinition) []Finding {
	if old == nil || n == nil {
		return nil
	}
	var out []Finding
	for _, ov := range old.Spec.Versions {
		nv := version(n, ov.Name)
		if nv == nil {
			continue
		}
		for _, col := range ov.AdditionalPrinterColumns {
			if !slices.ContainsFunc(nv.AdditionalPrinterColumns, func(c apiextensionsv1.CustomResourceColumnDefinition) bool { return c.Name == col.Name }) {
				out = append(out, finding(ov.Name, "printer column %q is removed", col.Name))
			}
		}
	}
	return out
}

// servedPairs calls fn with each two consecutive served versions of a CRD
// (new or added) whose schemas differ without a conversion webhook
// (graduation.ConversionMissing, the rule the operator's plan uses too).
func servedPairs(crd *apiextensionsv1.CustomResourceDefinition, fn func(a, b *apiextensionsv1.CustomResourceDefinitionVersion)) {
	if crd == nil {
		return
	}
	var served []*apiextensionsv1.CustomResourceDefinitionVersion
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Served {
			served = append(served, &crd.Spec.Versions[i])
		}
	}
	for i := 0; i+1 < len(served); i++ {
		if graduation.ConversionMissing(crd, served[i], served[i+1]) {
			fn(served[i], served[i+1])
		}
	}
}

// lossyConversion checks the served versions of the new CRD against each
// other: without a conversion webhook their schemas must not differ.
func lossyConversion(_, n *apiextensionsv1.CustomResourceDefinition) []Finding {
	var out []Finding
	servedPairs(n, func(a, b *apiextensionsv1.CustomResourceDefinitionVersion) {
		out = append(out, finding(b.Name, "versions %s and %s have different schemas but conversion is None: fields are dropped silently", a.Name, b.Name))
	})
	return out
}

// propertyMissingInServedVersion names each property only one of two
// served versions has, without a conversion webhook.
func propertyMissingInServedVersion(_, n *apiextensionsv1.CustomResourceDefinition) []Finding {
	var out []Finding
	servedPairs(n, func(a, b *apiextensionsv1.CustomResourceDefinitionVersion) {
		pa, pb := propertyPaths(schemaOf(a)), propertyPaths(schemaOf(b))
		for _, p := range symmetricDifference(pa, pb) {
			in, missing := a.Name, b.Name
			if !slices.Contains(pa, p) {
				in, missing = b.Name, a.Name
			}
			out = append(out, Finding{Version: missing, Path: p,
				Message: fmt.Sprintf("%s exists in %s but not in %s, and conversion is None: it is lost on a round trip", p, in, missing)})
		}
	})
	return out
}

func version(crd *apiextensionsv1.CustomResourceDefinition, name string) *apiextensionsv1.CustomResourceDefinitionVersion {
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == name {
			return &crd.Spec.Versions[i]
		}
	}
	return nil
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	v, _ := apihelpers.GetCRDStorageVersion(crd) // none: ""
	return v
}

func strategy(crd *apiextensionsv1.CustomResourceDefinition) apiextensionsv1.ConversionStrategyType {
	if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy == "" {
		return apiextensionsv1.NoneConverter
	}
	return crd.Spec.Conversion.Strategy
}

func schemaOf(v *apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.JSONSchemaProps {
	if v == nil || v.Schema == nil {
		return nil
	}
	return v.Schema.OpenAPIV3Schema
}
