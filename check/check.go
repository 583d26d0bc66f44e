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

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/graduator/graduator/graduation"
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
}

// The rules, by stable name. Config may change their enforcement.
var Rules = []Rule{
	{"crd-removed", Error, "a CRD is removed: the API server deletes every object of it"},
	{"scope-changed", Error, "the scope changed between Namespaced and Cluster: existing objects become unreachable"},
	{"stored-version-removed", Error, "a version still in status.storedVersions is removed: the API server refuses the CRD (only a live cluster knows storedVersions)"},
	{"served-version-removed", Error, "a served version is removed: its clients break"},
	{"storage-version-not-served-before", Error, "the storage version moved to a version the old CRD did not serve: objects written by old clients cannot be read back"},
	{"conversion-strategy-changed", Warning, "the conversion strategy changed"},
	{"lossy-conversion", Error, "versions have different schemas and conversion None: fields are dropped silently"},
	{"storage-version-unserved", Error, "the storage version is not served"},
	{"printer-column-removed", Warning, "a printer column is removed"},
	{"property-removed", Error, "a property is removed: its data is pruned from stored objects"},
	{"type-changed", Error, "a property's type changed: existing objects fail validation"},
	{"required-added", Error, "a property became required: existing objects without it fail validation on their next write"},
	{"enum-restricted", Error, "an enum value is removed, or an enum is added: existing values fail validation"},
	{"default-changed", Warning, "a default is added, removed or changed: objects read or written later change meaning"},
	{"bound-tightened", Error, "a minimum, maximum or length/items/properties bound is tightened: existing values fail validation"},
	{"pattern-changed", Error, "a pattern is added or changed: existing values may fail validation"},
	{"nullable-removed", Error, "nullable is removed: stored nulls fail validation"},
	{"validation-rule-added", Warning, "an x-kubernetes-validations rule is added (ratcheting spares only unchanged fields)"},
	{"list-type-changed", Error, "x-kubernetes-list-type or x-kubernetes-list-map-keys changed: server-side apply merges differently"},
	{"preserve-unknown-fields-removed", Error, "x-kubernetes-preserve-unknown-fields is removed: unknown fields are pruned from stored objects"},
	{"property-missing-in-served-version", Error, "a property exists in one served version and not in another, with conversion None: it is lost on a round trip"},
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
// oldCRDs. A CRD only in old is removed; one only in new is added, which is
// always safe. Findings whose enforcement is None are left out. The result
// is sorted by CRD, version, path and rule.
func Compare(oldCRDs, newCRDs map[string]*apiextensionsv1.CustomResourceDefinition, cfg Config) []Finding {
	var findings []Finding
	add := func(f Finding) {
		f.Enforcement = cfg.enforcement(f.Rule)
		if f.Enforcement != None {
			findings = append(findings, f)
		}
	}
	for name, old := range oldCRDs {
		n, ok := newCRDs[name]
		if !ok {
			add(Finding{Rule: "crd-removed", CRD: name, Message: fmt.Sprintf("%s is removed: the API server deletes every %s with it", name, old.Spec.Names.Plural)})
			continue
		}
		for _, f := range compareCRD(old, n) {
			add(f)
		}
	}
	for name, n := range newCRDs {
		if _, ok := oldCRDs[name]; !ok {
			for _, f := range servedVersionsAgree(n) {
				add(f)
			}
		}
	}
	sort.Slice(findings, func(i, j int) bool {
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

// compareCRD runs the CRD-wide rules, then the schema rules per version.
func compareCRD(old, n *apiextensionsv1.CustomResourceDefinition) []Finding {
	name := n.Name
	var out []Finding
	f := func(rule, version, format string, args ...any) {
		out = append(out, Finding{Rule: rule, CRD: name, Version: version, Message: fmt.Sprintf(format, args...)})
	}
	if old.Spec.Scope != n.Spec.Scope {
		f("scope-changed", "", "scope changed from %s to %s", old.Spec.Scope, n.Spec.Scope)
	}
	for _, v := range old.Status.StoredVersions {
		if version(n, v) == nil {
			f("stored-version-removed", v, "%s is removed but status.storedVersions still lists it: the API server refuses the CRD; migrate the objects and prune storedVersions first (graduator migrate %s --prune)", v, name)
		}
	}
	for _, ov := range old.Spec.Versions {
		if ov.Served && version(n, ov.Name) == nil {
			f("served-version-removed", ov.Name, "%s is removed while it is served: its clients break; stop serving it in an earlier release", ov.Name)
		}
	}
	if storage := storageVersion(n); storage != "" {
		if ov := version(old, storage); storage != storageVersion(old) && (ov == nil || !ov.Served) {
			f("storage-version-not-served-before", storage, "the storage version becomes %s, which the old CRD did not serve: objects written by old clients cannot be read back during the rollout", storage)
		}
		if nv := version(n, storage); nv != nil && !nv.Served {
			f("storage-version-unserved", storage, "the storage version %s is not served", storage)
		}
	}
	if strategy(old) != strategy(n) {
		f("conversion-strategy-changed", "", "the conversion strategy changed from %s to %s", strategy(old), strategy(n))
	}
	for _, ov := range old.Spec.Versions {
		nv := version(n, ov.Name)
		if nv == nil {
			continue
		}
		for _, col := range ov.AdditionalPrinterColumns {
			if !slices.ContainsFunc(nv.AdditionalPrinterColumns, func(c apiextensionsv1.CustomResourceColumnDefinition) bool { return c.Name == col.Name }) {
				f("printer-column-removed", ov.Name, "printer column %q is removed", col.Name)
			}
		}
		for _, d := range compareSchemas(schemaOf(&ov), schemaOf(nv)) {
			d.CRD, d.Version = name, ov.Name
			out = append(out, d)
		}
	}
	out = append(out, servedVersionsAgree(n)...)
	return out
}

// servedVersionsAgree checks the served versions of one CRD against each
// other: without a conversion webhook their schemas must not differ.
func servedVersionsAgree(crd *apiextensionsv1.CustomResourceDefinition) []Finding {
	var served []*apiextensionsv1.CustomResourceDefinitionVersion
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Served {
			served = append(served, &crd.Spec.Versions[i])
		}
	}
	var out []Finding
	for i := 0; i+1 < len(served); i++ {
		a, b := served[i], served[i+1]
		if !graduation.ConversionMissing(crd, a, b) {
			continue
		}
		out = append(out, Finding{Rule: "lossy-conversion", CRD: crd.Name, Version: b.Name,
			Message: fmt.Sprintf("versions %s and %s have different schemas but conversion is None: fields are dropped silently", a.Name, b.Name)})
		pa, pb := propertyPaths(schemaOf(a)), propertyPaths(schemaOf(b))
		for _, p := range symmetricDifference(pa, pb) {
			in, missing := a.Name, b.Name
			if !slices.Contains(pa, p) {
				in, missing = b.Name, a.Name
			}
			out = append(out, Finding{Rule: "property-missing-in-served-version", CRD: crd.Name, Version: missing, Path: p,
				Message: fmt.Sprintf("%s exists in %s but not in %s, and conversion is None: it is lost on a round trip", p, in, missing)})
		}
	}
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
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
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
