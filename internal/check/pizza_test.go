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
	"context"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/graduator/graduator/internal/check"
)

var _ = Describe("The Pizza CRD's stages, checked pairwise", func() {
	const pizzas = "pizzas.restaurant.example.com"
	stage := func(file string) map[string]*apiextensionsv1.CustomResourceDefinition {
		crds, err := check.Source{}.Load(context.Background(), filepath.Join("..", "..", "config", "samples", "pizza", file))
		Expect(err).NotTo(HaveOccurred())
		Expect(crds).To(HaveKey(pizzas))
		return crds
	}

	DescribeTable("every step is safe or only warns, until v1alpha1 is dropped",
		func(from, to string, expected []string) {
			findings := check.Compare(stage(from), stage(to), check.Config{})
			var rules []string
			for _, f := range findings {
				rules = append(rules, string(f.Enforcement)+" "+f.Rule+" "+f.Version)
			}
			if expected == nil {
				Expect(rules).To(BeEmpty())
			} else {
				Expect(rules).To(Equal(expected))
			}
		},
		Entry("1 -> 2: v1beta1 added, with a conversion webhook", "1-v1alpha1.yaml", "2-add-v1beta1.yaml",
			[]string{"warning conversion-strategy-changed "}),
		Entry("2 -> 3: v1beta1 stored", "2-add-v1beta1.yaml", "3-store-v1beta1.yaml", nil),
		Entry("3 -> 4: v1 added", "3-store-v1beta1.yaml", "4-add-v1.yaml", nil),
		Entry("4 -> 5: v1 stored", "4-add-v1.yaml", "5-store-v1.yaml", nil),
		Entry("5 -> 6: v1alpha1 dropped while the manifest still serves it", "5-store-v1.yaml", "6-drop-v1alpha1.yaml",
			[]string{"error served-version-removed v1alpha1"}),
	)

	It("flags stage 6 against a cluster that still stores v1alpha1, and passes it once the graduation pruned and unserved it", func() {
		live := stage("5-store-v1.yaml")
		live[pizzas].Status.StoredVersions = []string{"v1alpha1", "v1beta1", "v1"}
		findings := check.Compare(live, stage("6-drop-v1alpha1.yaml"), check.Config{})
		Expect(findings).To(ContainElement(And(HaveField("Rule", "stored-version-removed"), HaveField("Version", "v1alpha1"),
			HaveField("Enforcement", check.Error), HaveField("Message", ContainSubstring("graduator migrate")))))

		graduated := stage("5-store-v1.yaml")
		graduated[pizzas].Status.StoredVersions = []string{"v1"}
		for i := range graduated[pizzas].Spec.Versions {
			if graduated[pizzas].Spec.Versions[i].Name == "v1alpha1" {
				graduated[pizzas].Spec.Versions[i].Served = false
			}
		}
		Expect(check.Compare(graduated, stage("6-drop-v1alpha1.yaml"), check.Config{})).To(BeEmpty())
	})
})

var _ = Describe("Bad input", func() {
	DescribeTable("is refused with the reason",
		func(doc, reason string) {
			_, err := check.Parse("test.yaml", []byte(doc))
			Expect(err).To(MatchError(check.ErrBadInput))
			Expect(err).To(MatchError(ContainSubstring(reason)))
		},
		Entry("not YAML", "a: [b\n", "is not YAML or JSON"),
		Entry("a CRD without versions", `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec: {group: example.com, names: {plural: widgets, kind: Widget}, scope: Namespaced}
`, "spec.versions is missing"),
		Entry("a CRD with two storage versions", `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {plural: widgets, kind: Widget}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true}, {name: v2, served: true, storage: true}]
`, "exactly one storage version"),
		Entry("a misspelt field", `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec: {group: example.com, names: {plural: widgets, kind: Widget}, scope: Namespaced, versoins: []}
`, "versoins"),
	)
	It("ignores documents that are not CRDs", func() {
		crds, err := check.Parse("test.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\n"))
		Expect(err).NotTo(HaveOccurred())
		Expect(crds).To(BeEmpty())
	})
})

var _ = Describe("A CRD the API server would refuse", func() {
	It("is bad input, with the API server's own words", func() {
		_, err := check.Parse("test.yaml", []byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {plural: widgets, kind: Widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer, default: "big"}}}
`))
		Expect(err).To(MatchError(check.ErrBadInput))
		Expect(err).To(MatchError(ContainSubstring("the API server would refuse it")))
		Expect(err).To(MatchError(ContainSubstring("default")))
	})
})
