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

package fleet_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/graduator/graduator/internal/driver"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/envtestutil/envsuite"
)

// epsilons is epsilons.prepare.example: v1's spec has color; v2's has
// colour and only2, which v1 cannot hold. With a webhook it converts
// through it and stores v2 (release N+1); without, it is release N's: v1
// only.
func epsilons(webhook *apiextensionsv1.WebhookClientConfig) *apiextensionsv1.CustomResourceDefinition {
	crd := prepCRD("Epsilon", false)
	schemaOf := func(fields ...string) *apiextensionsv1.CustomResourceValidation {
		spec := map[string]apiextensionsv1.JSONSchemaProps{}
		for _, f := range fields {
			spec[f] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		}
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", Properties: spec}}}}
	}
	if webhook == nil {
		crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true, Schema: schemaOf("color")}}
		return crd
	}
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{
		{Name: "v1", Served: true, Schema: schemaOf("color")},
		{Name: "v2", Served: true, Storage: true, Schema: schemaOf("colour", "only2")},
	}
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"}, ClientConfig: webhook}}
	return crd
}

var _ = Describe("graduator prepare rolling back across a conversion webhook", Ordered, func() {
	var (
		p       *plane
		config  string
		release string
		n       = 50
	)

	BeforeAll(func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		p, config = preparerPlane(ctx, dir, "rollback-w", nil)

		By(fmt.Sprintf("release N+1: %d epsilons stored as v2 through the conversion webhook, each with spec.only2", n))
		bin, err := gexec.Build("github.com/graduator/graduator/test/roundtripwebhook")
		Expect(err).NotTo(HaveOccurred())
		crd := epsilons(envsuite.StartConversionWebhook(bin))
		Expect(p.env.Client.Create(ctx, crd)).To(Succeed())
		Expect(envtestutil.WaitServed(ctx, p.env.Client, p.env.Dynamic, crd.Name)).To(Succeed())
		gvr := schema.GroupVersionResource{Group: prepGroup, Version: "v2", Resource: "epsilons"}
		Expect(envtestutil.CreateObjects(ctx, p.env.Dynamic, gvr, n, 8, func(i int) *unstructured.Unstructured {
			return &unstructured.Unstructured{Object: map[string]any{"apiVersion": prepGroup + "/v2", "kind": "Epsilon",
				"metadata": map[string]any{"name": fmt.Sprintf("o%d", i), "namespace": "default"},
				"spec":     map[string]any{"colour": fmt.Sprintf("c%d", i), "only2": "kept in v2 only"}}}
		})).To(Succeed())

		data, err := yaml.Marshal(epsilons(nil))
		Expect(err).NotTo(HaveOccurred())
		release = filepath.Join(dir, "release-n.yaml")
		Expect(os.WriteFile(release, data, 0o600)).To(Succeed())
	})

	It("refuses by default, naming the path v1 cannot hold, and writes nothing", func(ctx SpecContext) {
		code, out, errOut := runPrepare(config, "prepare", "--against", release, "-o", "json")
		GinkgoWriter.Printf("prepare:\n%s\n%s\n", out, errOut)
		Expect(code).To(Equal(1), errOut)
		var got map[string]prepared
		Expect(json.Unmarshal([]byte(out), &got)).To(Succeed(), out)
		w := got[p.name]
		Expect(w.Outcome).To(Equal("Refused"))
		Expect(w.CRDs).To(HaveLen(1))
		Expect(w.CRDs[0].Verdict).To(Equal("Rollback"))
		Expect(w.CRDs[0].Refused).To(ContainSubstring("/spec/only2"))
		Expect(w.CRDs[0].Refused).To(ContainSubstring("--accept-loss"))
		Expect(realWrites(p, preparer, "")).To(BeEmpty(), "a refused rollback wrote")
		Expect(storedAs(ctx, p, "epsilons")).To(Equal(map[string]int{prepGroup + "/v2": n}))
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(p.env.Client.Get(ctx, client.ObjectKey{Name: "epsilons." + prepGroup}, crd)).To(Succeed())
		Expect(crd.Status.StoredVersions).To(Equal([]string{"v2"}))
		Expect(crd.Annotations).NotTo(HaveKey(driver.StateAnnotation))
	})

	It("rolls back with --accept-loss naming the path: every object as v1, storedVersions [v1], release N applies", func(ctx SpecContext) {
		code, out, errOut := runPrepare(config, "prepare", "--against", release, "--accept-loss", "/spec/only2", "-o", "json")
		GinkgoWriter.Printf("prepare --accept-loss:\n%s\n%s\n", out, errOut)
		Expect(code).To(BeZero(), errOut)
		var got map[string]prepared
		Expect(json.Unmarshal([]byte(out), &got)).To(Succeed(), out)
		Expect(got[p.name].Outcome).To(Equal("Ready"), got[p.name].Why)
		Expect(storedAs(ctx, p, "epsilons")).To(Equal(map[string]int{prepGroup + "/v1": n}))

		By("release N's CRD, which knows no webhook and no v2, applies")
		want := epsilons(nil)
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			live := &apiextensionsv1.CustomResourceDefinition{}
			if err := p.env.Client.Get(ctx, client.ObjectKeyFromObject(want), live); err != nil {
				return err
			}
			live.Spec = want.Spec
			return p.env.Client.Update(ctx, live)
		})).To(Succeed())
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(p.env.Client.Get(ctx, client.ObjectKeyFromObject(want), crd)).To(Succeed())
		Expect(crd.Status.StoredVersions).To(Equal([]string{"v1"}))
		list, err := p.env.Dynamic.Resource(schema.GroupVersionResource{Group: prepGroup, Version: "v1", Resource: "epsilons"}).
			Namespace("default").List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Items).To(HaveLen(n))
		for _, o := range list.Items {
			var i int
			_, err := fmt.Sscanf(o.GetName(), "o%d", &i)
			Expect(err).NotTo(HaveOccurred())
			Expect(o.Object["spec"]).To(Equal(map[string]any{"color": fmt.Sprintf("c%d", i)}), o.GetName())
		}
	})
})
