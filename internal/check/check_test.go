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

package check_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/graduator/graduator/internal/check"
)

func TestCheck(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "check")
}

func props(kv ...any) map[string]apiextensionsv1.JSONSchemaProps {
	out := map[string]apiextensionsv1.JSONSchemaProps{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1].(apiextensionsv1.JSONSchemaProps)
	}
	return out
}

func raw(s string) apiextensionsv1.JSON { return apiextensionsv1.JSON{Raw: []byte(s)} }

// widgetSchema is the schema every version of the base CRD starts with.
func widgetSchema() *apiextensionsv1.CustomResourceValidation {
	return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: props("spec", apiextensionsv1.JSONSchemaProps{
			Type: "object",
			Properties: props(
				"size", apiextensionsv1.JSONSchemaProps{Type: "integer", Minimum: ptr.To(1.0), Maximum: ptr.To(10.0)},
				"color", apiextensionsv1.JSONSchemaProps{Type: "string", Enum: []apiextensionsv1.JSON{raw(`"red"`), raw(`"blue"`)}, Default: ptr.To(raw(`"red"`))},
				"name", apiextensionsv1.JSONSchemaProps{Type: "string", MaxLength: ptr.To[int64](63)},
				"note", apiextensionsv1.JSONSchemaProps{Type: "string", Nullable: true},
				"tags", apiextensionsv1.JSONSchemaProps{Type: "array", XListType: ptr.To("set"),
					Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
				"extra", apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)},
			),
		}),
	}}
}

// base is widgets.example.com serving v1alpha1 and v1 (storage), one schema,
// with everything stored in v1.
func base() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1alpha1", Served: true, Schema: widgetSchema()},
				{Name: "v1", Served: true, Storage: true, Schema: widgetSchema(),
					AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Size", Type: "integer", JSONPath: ".spec.size"}}},
			},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1"}},
	}
}

// editSpec changes the spec schema of a version of the new CRD.
func editSpec(version string, edit func(*apiextensionsv1.JSONSchemaProps)) func(_, n *apiextensionsv1.CustomResourceDefinition) {
	return func(_, n *apiextensionsv1.CustomResourceDefinition) {
		for i := range n.Spec.Versions {
			if n.Spec.Versions[i].Name == version {
				s := n.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
				edit(&s)
				n.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = s
			}
		}
	}
}

func editProp(name string, edit func(*apiextensionsv1.JSONSchemaProps)) func(_, n *apiextensionsv1.CustomResourceDefinition) {
	return func(o, n *apiextensionsv1.CustomResourceDefinition) {
		for _, v := range []string{"v1alpha1", "v1"} {
			editSpec(v, func(s *apiextensionsv1.JSONSchemaProps) {
				p := s.Properties[name]
				edit(&p)
				s.Properties[name] = p
			})(o, n)
		}
	}
}

func removeVersion(crd *apiextensionsv1.CustomResourceDefinition, name string) {
	var kept []apiextensionsv1.CustomResourceDefinitionVersion
	for _, v := range crd.Spec.Versions {
		if v.Name != name {
			kept = append(kept, v)
		}
	}
	crd.Spec.Versions = kept
}

// tested records, as the table below is built, which rules an entry
// makes fire and which an entry proves quiet.
var tested = map[string]map[bool]bool{}

// ruleEntry is an entry of the rules' table test.
func ruleEntry(description string, change func(old, n *apiextensionsv1.CustomResourceDefinition), rule, version, path string,
	enforcement check.Enforcement, fires bool) TableEntry {
	if tested[rule] == nil {
		tested[rule] = map[bool]bool{}
	}
	tested[rule][fires] = true
	return Entry(description, change, rule, version, path, enforcement, fires)
}

// ruleNamed is the rule of that name in check.Rules.
func ruleNamed(name string) check.Rule {
	for _, r := range check.Rules {
		if r.Name == name {
			return r
		}
	}
	Fail("no rule " + name + " in check.Rules")
	return check.Rule{}
}

var _ = Describe("Compare", func() {
	It("runs every rule of the table, each a named function with an entry that makes it fire", func() {
		for _, r := range check.Rules {
			Expect(r.Check).NotTo(BeNil(), r.Name)
			Expect(r.Doc).NotTo(BeEmpty(), r.Name)
			if r.Name != "crd-removed" { // a pair of CRDs cannot remove one: its own spec below
				Expect(tested[r.Name]).To(HaveKey(true), "no entry of the table makes %s fire", r.Name)
			}
		}
		Expect(len(tested)).To(BeNumerically("<=", len(check.Rules)), "every entry names a rule of the table")
	})

	DescribeTable("each rule fires on the change it is about, with its path and enforcement, and not on a safe one",
		func(change func(old, n *apiextensionsv1.CustomResourceDefinition), rule, version, path string, enforcement check.Enforcement, fires bool) {
			old, n := base(), base()
			change(old, n)
			findings := check.Compare(map[string]*apiextensionsv1.CustomResourceDefinition{old.Name: old},
				map[string]*apiextensionsv1.CustomResourceDefinition{n.Name: n}, check.Config{})
			own := ruleNamed(rule).Check(old, n)
			var reported []check.Finding
			for _, f := range findings {
				if f.Rule == rule {
					reported = append(reported, f)
				}
			}
			Expect(reported).To(HaveLen(len(own)), "Compare reports what the rule's own function finds: %+v", own)
			match := And(HaveField("Rule", rule), HaveField("Path", path), HaveField("CRD", "widgets.example.com"))
			if version != "" {
				match = And(match, HaveField("Version", version))
			}
			if fires {
				Expect(findings).To(ContainElement(And(match, HaveField("Enforcement", enforcement))), "%+v", findings)
			} else {
				Expect(findings).NotTo(ContainElement(HaveField("Rule", rule)), "%+v", findings)
			}
		},
		ruleEntry("scope changed", func(_, n *apiextensionsv1.CustomResourceDefinition) { n.Spec.Scope = apiextensionsv1.ClusterScoped },
			"scope-changed", "", "", check.Error, true),
		ruleEntry("a version removed while still stored", func(o, n *apiextensionsv1.CustomResourceDefinition) {
			o.Status.StoredVersions = []string{"v1alpha1", "v1"}
			removeVersion(n, "v1alpha1")
		}, "stored-version-removed", "v1alpha1", "", check.Error, true),
		ruleEntry("a version removed once no longer stored is not a storage error", func(_, n *apiextensionsv1.CustomResourceDefinition) {
			removeVersion(n, "v1alpha1")
		}, "stored-version-removed", "", "", check.Error, false),
		ruleEntry("a served version removed", func(_, n *apiextensionsv1.CustomResourceDefinition) { removeVersion(n, "v1alpha1") },
			"served-version-removed", "v1alpha1", "", check.Error, true),
		ruleEntry("an unserved version removed", func(o, n *apiextensionsv1.CustomResourceDefinition) {
			o.Spec.Versions[0].Served = false
			removeVersion(n, "v1alpha1")
		}, "served-version-removed", "", "", check.Error, false),
		ruleEntry("storage moved to a version the old CRD did not serve", func(o, n *apiextensionsv1.CustomResourceDefinition) {
			o.Spec.Versions[0].Served = false
			n.Spec.Versions[0].Storage, n.Spec.Versions[1].Storage = true, false
		}, "storage-version-not-served-before", "v1alpha1", "", check.Error, true),
		ruleEntry("storage moved to a version the old CRD served", func(_, n *apiextensionsv1.CustomResourceDefinition) {
			n.Spec.Versions[0].Storage, n.Spec.Versions[1].Storage = true, false
		}, "storage-version-not-served-before", "", "", check.Error, false),
		ruleEntry("conversion strategy changed", func(_, n *apiextensionsv1.CustomResourceDefinition) {
			n.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter}
		}, "conversion-strategy-changed", "", "", check.Warning, true),
		ruleEntry("schemas differ without a conversion webhook", editSpec("v1", func(s *apiextensionsv1.JSONSchemaProps) {
			s.Properties["weight"] = apiextensionsv1.JSONSchemaProps{Type: "integer"}
		}), "lossy-conversion", "v1", "", check.Error, true),
		ruleEntry("schemas differ with a conversion webhook", func(o, n *apiextensionsv1.CustomResourceDefinition) {
			o.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter}
			n.Spec.Conversion = o.Spec.Conversion
			editSpec("v1", func(s *apiextensionsv1.JSONSchemaProps) {
				s.Properties["weight"] = apiextensionsv1.JSONSchemaProps{Type: "integer"}
			})(o, n)
		}, "lossy-conversion", "", "", check.Error, false),
		ruleEntry("a property only one served version has, with conversion None", editSpec("v1", func(s *apiextensionsv1.JSONSchemaProps) {
			s.Properties["weight"] = apiextensionsv1.JSONSchemaProps{Type: "integer"}
		}), "property-missing-in-served-version", "v1alpha1", "^.spec.weight", check.Error, true),
		ruleEntry("the storage version unserved", func(_, n *apiextensionsv1.CustomResourceDefinition) { n.Spec.Versions[1].Served = false },
			"storage-version-unserved", "v1", "", check.Error, true),
		ruleEntry("a printer column removed", func(_, n *apiextensionsv1.CustomResourceDefinition) {
			n.Spec.Versions[1].AdditionalPrinterColumns = nil
		},
			"printer-column-removed", "v1", "", check.Warning, true),
		ruleEntry("a printer column added", func(_, n *apiextensionsv1.CustomResourceDefinition) {
			n.Spec.Versions[1].AdditionalPrinterColumns = append(n.Spec.Versions[1].AdditionalPrinterColumns,
				apiextensionsv1.CustomResourceColumnDefinition{Name: "Color", Type: "string", JSONPath: ".spec.color"})
		}, "printer-column-removed", "", "", check.Warning, false),
		ruleEntry("a property removed", editProp("note", func(*apiextensionsv1.JSONSchemaProps) {}),
			"property-removed", "", "", check.Error, false), // editing keeps it: must not fire
		ruleEntry("a property removed from both versions", func(o, n *apiextensionsv1.CustomResourceDefinition) {
			for _, v := range []string{"v1alpha1", "v1"} {
				editSpec(v, func(s *apiextensionsv1.JSONSchemaProps) { delete(s.Properties, "note") })(o, n)
			}
		}, "property-removed", "v1", "^.spec.note", check.Error, true),
		ruleEntry("a type changed", editProp("size", func(p *apiextensionsv1.JSONSchemaProps) { p.Type = "string"; p.Minimum, p.Maximum = nil, nil }),
			"type-changed", "v1", "^.spec.size", check.Error, true),
		ruleEntry("a new required field", func(o, n *apiextensionsv1.CustomResourceDefinition) {
			for _, v := range []string{"v1alpha1", "v1"} {
				editSpec(v, func(s *apiextensionsv1.JSONSchemaProps) { s.Required = []string{"color"} })(o, n)
			}
		}, "required-added", "v1", "^.spec.color", check.Error, true),
		ruleEntry("an enum value removed", editProp("color", func(p *apiextensionsv1.JSONSchemaProps) { p.Enum = p.Enum[:1] }),
			"enum-restricted", "v1", "^.spec.color", check.Error, true),
		ruleEntry("an enum value added", editProp("color", func(p *apiextensionsv1.JSONSchemaProps) { p.Enum = append(p.Enum, raw(`"green"`)) }),
			"enum-restricted", "", "", check.Error, false),
		ruleEntry("an enum added", editProp("name", func(p *apiextensionsv1.JSONSchemaProps) { p.Enum = []apiextensionsv1.JSON{raw(`"a"`)} }),
			"enum-restricted", "v1", "^.spec.name", check.Error, true),
		ruleEntry("a default changed", editProp("color", func(p *apiextensionsv1.JSONSchemaProps) { p.Default = ptr.To(raw(`"blue"`)) }),
			"default-changed", "v1", "^.spec.color", check.Warning, true),
		ruleEntry("a maximum tightened", editProp("size", func(p *apiextensionsv1.JSONSchemaProps) { p.Maximum = ptr.To(5.0) }),
			"bound-tightened", "v1", "^.spec.size", check.Error, true),
		ruleEntry("a maximum loosened", editProp("size", func(p *apiextensionsv1.JSONSchemaProps) { p.Maximum = ptr.To(20.0) }),
			"bound-tightened", "", "", check.Error, false),
		ruleEntry("a maxLength tightened", editProp("name", func(p *apiextensionsv1.JSONSchemaProps) { p.MaxLength = ptr.To[int64](10) }),
			"bound-tightened", "v1", "^.spec.name", check.Error, true),
		ruleEntry("a minItems added", editProp("tags", func(p *apiextensionsv1.JSONSchemaProps) { p.MinItems = ptr.To[int64](1) }),
			"bound-tightened", "v1", "^.spec.tags", check.Error, true),
		ruleEntry("a pattern added", editProp("name", func(p *apiextensionsv1.JSONSchemaProps) { p.Pattern = "^[a-z]+$" }),
			"pattern-changed", "v1", "^.spec.name", check.Error, true),
		ruleEntry("nullable removed", editProp("note", func(p *apiextensionsv1.JSONSchemaProps) { p.Nullable = false }),
			"nullable-removed", "v1", "^.spec.note", check.Error, true),
		ruleEntry("a validation rule added", editProp("name", func(p *apiextensionsv1.JSONSchemaProps) {
			p.XValidations = apiextensionsv1.ValidationRules{{Rule: "self != 'admin'"}}
		}), "validation-rule-added", "v1", "^.spec.name", check.Warning, true),
		ruleEntry("a list type changed", editProp("tags", func(p *apiextensionsv1.JSONSchemaProps) { p.XListType = ptr.To("atomic") }),
			"list-type-changed", "v1", "^.spec.tags", check.Error, true),
		ruleEntry("preserve-unknown-fields removed", editProp("extra", func(p *apiextensionsv1.JSONSchemaProps) { p.XPreserveUnknownFields = nil }),
			"preserve-unknown-fields-removed", "v1", "^.spec.extra", check.Error, true),
	)

	It("reports a removed CRD, never an added one, and nothing for an identical pair", func() {
		only := map[string]*apiextensionsv1.CustomResourceDefinition{"widgets.example.com": base()}
		none := map[string]*apiextensionsv1.CustomResourceDefinition{}
		Expect(check.Compare(only, none, check.Config{})).To(ConsistOf(HaveField("Rule", "crd-removed")))
		Expect(check.Compare(none, only, check.Config{})).To(BeEmpty())
		Expect(check.Compare(only, map[string]*apiextensionsv1.CustomResourceDefinition{"widgets.example.com": base()}, check.Config{})).To(BeEmpty())
	})

	It("takes each rule's enforcement from the config, and refuses unknown rules", func() {
		old, n := base(), base()
		n.Spec.Scope = apiextensionsv1.ClusterScoped
		crds := func(c *apiextensionsv1.CustomResourceDefinition) map[string]*apiextensionsv1.CustomResourceDefinition {
			return map[string]*apiextensionsv1.CustomResourceDefinition{c.Name: c}
		}
		Expect(check.Compare(crds(old), crds(n), check.Config{Enforcement: map[string]check.Enforcement{"scope-changed": check.Warning}})).
			To(ConsistOf(HaveField("Enforcement", check.Warning)))
		Expect(check.Compare(crds(old), crds(n), check.Config{Enforcement: map[string]check.Enforcement{"scope-changed": check.None}})).To(BeEmpty())
		Expect(check.Config{Enforcement: map[string]check.Enforcement{"no-such-rule": check.Error}}.Validate()).To(MatchError(ContainSubstring("no-such-rule")))
		Expect(check.Config{Enforcement: map[string]check.Enforcement{"scope-changed": "fatal"}}.Validate()).To(HaveOccurred())
	})
})
