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

// Package roundtrip_test proves the round-trip proof against a real
// kube-apiserver and etcd (envtest) and a real conversion webhook process
// (test/roundtripwebhook, TLS, ConversionReview v1), lossy or not.
package roundtrip_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/envtestutil/envsuite"
	"github.com/graduator/graduator/test/pizzaenv"
)

var (
	env     *envtestutil.Env
	webhook string // the built test/roundtripwebhook
	groups  atomic.Int32
)

func TestRoundTrip(t *testing.T) {
	envsuite.RunSpecs(t, "Round-trip proof suite (envtest, a conversion webhook process)")
}

var _ = BeforeSuite(func() {
	env = envsuite.Start(envtestutil.Options{Unthrottled: true, OperatorCRDs: true,
		AddToScheme: []func(*runtime.Scheme) error{graduatorv1alpha1.AddToScheme, pizzaenv.AddToScheme}})
	var err error
	// envsuite's cleanup kills what gexec started and removes the binary.
	webhook, err = gexec.Build("github.com/graduator/graduator/test/roundtripwebhook")
	Expect(err).NotTo(HaveOccurred())
})

// webhookProcess is a running test/roundtripwebhook.
type webhookProcess struct {
	url string
	ca  []byte
}

// startWebhook runs test/roundtripwebhook with a serving certificate of
// its own, until the spec ends (or the suite's cleanup kills it); lossy
// drops spec.rare.
func startWebhook(lossy bool) webhookProcess {
	GinkgoHelper()
	return startWebhookWith("--lossy=" + strconv.FormatBool(lossy))
}

// startWebhookWith runs test/roundtripwebhook with args.
func startWebhookWith(args ...string) webhookProcess {
	GinkgoHelper()
	cc := envsuite.StartConversionWebhook(webhook, args...)
	return webhookProcess{url: *cc.URL, ca: cc.CABundle}
}

// gadgets is a fresh CRD "gadgets.<group>" with v1 (storage) and v2, all
// objects in namespace default.
type gadgets struct {
	crd    *apiextensionsv1.CustomResourceDefinition
	group  string
	v1, v2 schema.GroupVersionResource
	// deleteWithin bounds the CRD's deletion at the spec's end, which
	// deletes every gadget: create raises it with the population.
	deleteWithin *time.Duration
}

func (g gadgets) resource(version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: g.group, Version: version, Resource: "gadgets"}
}

func props(fields ...string) map[string]apiextensionsv1.JSONSchemaProps {
	p := map[string]apiextensionsv1.JSONSchemaProps{
		"size": {Type: "integer"},
		"parts": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": {Type: "string"}, "count": {Type: "integer"}}}}},
	}
	for _, f := range fields {
		p[f] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	}
	return p
}

// newGadgets installs the CRD: v1's spec has color and rare, v2's colour
// and rare, converted by the webhook at w; without a webhook (strategy
// None), v1 has color and legacy, v2 only color. Each version's spec also
// has the fields of extra.
func newGadgets(ctx context.Context, w *webhookProcess, extra ...map[string]apiextensionsv1.JSONSchemaProps) gadgets {
	GinkgoHelper()
	group := fmt.Sprintf("g%d.roundtrip.example.com", groups.Add(1))
	v1, v2 := props("color", "rare"), props("colour", "rare")

	conv := &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	if w != nil {
		conv = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
				ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &w.url, CABundle: w.ca}}}
	} else {
		v1, v2 = props("color", "legacy"), props("color")
	}
	for _, fields := range extra {
		for name, p := range fields {
			v1[name], v2[name] = p, p
		}
	}
	schemaOf := func(spec map[string]apiextensionsv1.JSONSchemaProps) *apiextensionsv1.CustomResourceValidation {
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", Properties: spec}}}}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped, Conversion: conv,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schemaOf(v1)},
				{Name: "v2", Served: true, Schema: schemaOf(v2)},
			},
		},
	}
	Expect(env.Client.Create(ctx, crd)).To(Succeed())
	deleteWithin := 2 * time.Minute
	DeferCleanup(func(ctx SpecContext) {
		Expect(envtestutil.DeleteCRD(ctx, env.Client, crd.Name, deleteWithin)).To(Succeed())
	})
	Expect(envtestutil.WaitServed(ctx, env.Client, env.Dynamic, crd.Name)).To(Succeed())
	g := gadgets{crd: crd, group: group, deleteWithin: &deleteWithin}
	g.v1, g.v2 = g.resource("v1"), g.resource("v2")
	return g
}

// create creates n gadgets at v1, spec(i) each, named gadget-00000...
func (g gadgets) create(ctx context.Context, n int, spec func(i int) map[string]any) {
	GinkgoHelper()
	// The API server deletes a CRD's objects one by one: 100,000 take
	// minutes.
	*g.deleteWithin = max(*g.deleteWithin, 2*time.Minute+time.Duration(n)*10*time.Millisecond)
	Expect(envtestutil.CreateObjects(ctx, env.Dynamic, g.v1, n, min(64, max(8, n/1000)), func(i int) *unstructured.Unstructured {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": g.v1.GroupVersion().String(), "kind": "Gadget",
			"metadata": map[string]any{"name": fmt.Sprintf("gadget-%05d", i), "namespace": "default"},
			"spec":     spec(i),
		}}
		return obj
	})).To(Succeed())
}

// fresh reads the CRD as the API server has it now.
func (g gadgets) fresh(ctx context.Context) *apiextensionsv1.CustomResourceDefinition {
	GinkgoHelper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	Expect(env.Client.Get(ctx, types.NamespacedName{Name: g.crd.Name}, crd)).To(Succeed())
	return crd
}

// resourceVersions maps each object to its resourceVersion: a proof that
// writes nothing leaves it as it was.
func (g gadgets) resourceVersions(ctx context.Context) map[string]string {
	GinkgoHelper()
	out := map[string]string{}
	g.each(ctx, g.v1, func(o *unstructured.Unstructured) { out[o.GetName()] = o.GetResourceVersion() })
	return out
}

// each calls fn with every gadget read at gvr, in pages: a population of
// 100,000 is not read in one response.
func (g gadgets) each(ctx context.Context, gvr schema.GroupVersionResource, fn func(*unstructured.Unstructured)) {
	GinkgoHelper()
	opts := metav1.ListOptions{Limit: 2000}
	for {
		list, err := env.Dynamic.Resource(gvr).List(ctx, opts)
		Expect(err).NotTo(HaveOccurred())
		for i := range list.Items {
			fn(&list.Items[i])
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return
		}
	}
}

// switchStorage makes v2 the storage version and waits until the API
// server writes it.
func (g gadgets) switchStorage(ctx context.Context) {
	GinkgoHelper()
	Expect(envtestutil.SetStorageVersion(ctx, env.Client, g.crd.Name, "v2")).To(Succeed())
	waitStoredAs(ctx, g.v1, "Gadget", g.group+"/v2")
}

// waitStoredAs waits until a probe object of kind, written through gvr,
// is seen in etcd at apiVersion: the API server then writes the new
// storage version. The probe is deleted.
func waitStoredAs(ctx context.Context, gvr schema.GroupVersionResource, kind, apiVersion string) {
	GinkgoHelper()
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"name": "probe", "namespace": "kube-system"},
	}}
	probes := env.Dynamic.Resource(gvr).Namespace("kube-system")
	_, err := probes.Create(ctx, probe, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	Eventually(func(g Gomega) string {
		_, err := probes.Patch(ctx, "probe", types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"probe":"`+time.Now().String()+`"}}}`), metav1.PatchOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		versions, err := env.Etcd.APIVersions(ctx, gvr.Group, gvr.Resource)
		g.Expect(err).NotTo(HaveOccurred())
		return versions["kube-system/probe"]
	}).WithTimeout(30 * time.Second).Should(Equal(apiVersion))
	Expect(probes.Delete(ctx, "probe", metav1.DeleteOptions{})).To(Succeed())
}
