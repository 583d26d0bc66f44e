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
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// gadgetCRD has v1 and v2; v2's schema lacks spec.legacy unless withLegacy.
func gadgetCRD(conv *apiextensionsv1.CustomResourceConversion, withLegacy bool) *apiextensionsv1.CustomResourceDefinition {
	spec := func(legacy bool) apiextensionsv1.JSONSchemaProps {
		p := map[string]apiextensionsv1.JSONSchemaProps{"color": {Type: "string"}, "rare": {Type: "string"}}
		if legacy {
			p["legacy"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		}
		return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", Properties: p}}}
	}
	v1, v2 := spec(true), spec(withLegacy)
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Gadget", Plural: "gadgets"},
			Conversion: conv,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &v1}},
				{Name: "v2", Served: true, Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &v2}},
			},
		},
	}
}

func gadgets(t *testing.T) []*unstructured.Unstructured {
	return []*unstructured.Unstructured{
		unstructuredOf(t, `{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"a","namespace":"ns","uid":"1"},"spec":{"color":"red"}}`),
		unstructuredOf(t, `{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"b","namespace":"ns","uid":"2"},"spec":{"color":"red","rare":"r","legacy":"l"}}`),
	}
}

func lossesOf(pairs []pair) map[string][]string {
	out := map[string][]string{}
	for _, p := range pairs {
		if lost := Compare(p.a.Object, p.b.Object); len(lost) > 0 {
			out[p.a.GetName()] = lost
		}
	}
	return out
}

func TestPruningOnlyLosesWhatTheTargetSchemaLacks(t *testing.T) {
	for _, tc := range []struct {
		name       string
		withLegacy bool
		want       map[string][]string
	}{
		{name: "target schema lacks spec.legacy", want: map[string][]string{"b": {"/spec/legacy"}}},
		{name: "target schema has it", withLegacy: true, want: map[string][]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conv, err := newConverter(gadgetCRD(nil, tc.withLegacy), nil)
			if err != nil {
				t.Fatal(err)
			}
			pairs, err := converted{conv: conv, old: "v1", target: "v2"}.roundTrip(context.Background(), gadgets(t))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, lossesOf(pairs)); diff != "" {
				t.Errorf("losses (-want +got):\n%s", diff)
			}
		})
	}
}

// dropRare is a conversion webhook that drops spec.rare on the way to v2
// and tries to change the uid (which the API server, and the proof, undo).
func dropRare(t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review struct {
			APIVersion string                             `json:"apiVersion"`
			Kind       string                             `json:"kind"`
			Request    *apiextensionsv1.ConversionRequest `json:"request"`
		}
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			t.Error(err)
			return
		}
		resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
		for _, raw := range review.Request.Objects {
			var o unstructured.Unstructured
			if err := o.UnmarshalJSON(raw.Raw); err != nil {
				t.Error(err)
				return
			}
			if review.Request.DesiredAPIVersion == "example.com/v2" {
				unstructured.RemoveNestedField(o.Object, "spec", "rare")
			}
			o.SetAPIVersion(review.Request.DesiredAPIVersion)
			o.SetUID("changed")
			data, _ := o.MarshalJSON()
			resp.ConvertedObjects = append(resp.ConvertedObjects, runtimeRaw(data))
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": review.APIVersion, "kind": review.Kind, "response": resp})
	})
}

func TestWebhookRoundTrip(t *testing.T) {
	server := httptest.NewTLSServer(dropRare(t))
	defer server.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})
	url := server.URL + "/convert"
	crd := gadgetCRD(&apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
			ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: ca}},
	}, true)
	conv, err := newConverter(crd, nil)
	if err != nil {
		t.Fatal(err)
	}
	objs := gadgets(t)
	pairs, err := converted{conv: conv, old: "v1", target: "v2"}.roundTrip(context.Background(), objs)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]string{"b": {"/spec/rare"}}, lossesOf(pairs)); diff != "" {
		t.Errorf("losses (-want +got):\n%s", diff)
	}
	if pairs[1].b.GetUID() != "2" || objs[1].GetAPIVersion() != "example.com/v1" {
		t.Errorf("metadata not restored (uid %s) or the input changed (%s)", pairs[1].b.GetUID(), objs[1].GetAPIVersion())
	}

	// A webhook that cannot be reached is an error, not a loss.
	server.Close()
	if _, err := (converted{conv: conv, old: "v1", target: "v2"}).roundTrip(context.Background(), objs); err == nil {
		t.Error("roundTrip with the webhook down returned no error")
	}
}

func TestServiceReference(t *testing.T) {
	path, port := "/convert", int32(8443)
	w, err := newWebhookClient(&apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1beta1", "v1"},
		ClientConfig: &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{
			Namespace: "shop", Name: "conv", Path: &path, Port: &port}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if w.url != "https://conv.shop.svc:8443/convert" || w.reviewVersion != "v1" {
		t.Errorf("url %s, review version %s", w.url, w.reviewVersion)
	}
}

func runtimeRaw(data []byte) runtime.RawExtension { return runtime.RawExtension{Raw: data} }

// A zero the conversion drops comes back at the old version as the schema's
// default, as the API server reads it: replicas 0 is read as 1, a loss;
// replicas 1 dropped and defaulted back is none.
func TestDroppedZeroComesBackDefaulted(t *testing.T) {
	crd := gadgetCRD(nil, true)
	v1 := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	v1.Properties["replicas"] = apiextensionsv1.JSONSchemaProps{Type: "integer", Default: &apiextensionsv1.JSON{Raw: []byte("1")}}
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = v1
	conv, err := newConverter(crd, nil)
	if err != nil {
		t.Fatal(err)
	}
	objs := []*unstructured.Unstructured{
		unstructuredOf(t, `{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"zero","namespace":"ns"},"spec":{"replicas":0}}`),
		unstructuredOf(t, `{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"one","namespace":"ns"},"spec":{"replicas":1}}`),
	}
	pairs, err := converted{conv: conv, old: "v1", target: "v2"}.roundTrip(context.Background(), objs)
	if err != nil {
		t.Fatal(err)
	}
	if got := pairs[0].b.Object["spec"].(map[string]any)["replicas"]; got != int64(1) {
		t.Errorf("replicas read back as %v, want the default 1", got)
	}
	if diff := cmp.Diff(map[string][]string{"zero": {"/spec/replicas"}}, lossesOf(pairs)); diff != "" {
		t.Errorf("losses (-want +got):\n%s", diff)
	}
}

// applyDefaults fills what the API server fills on read: an absent field, a
// null the schema does not allow, in lists and maps too; not a null it
// allows, nor a value present.
func TestApplyDefaults(t *testing.T) {
	one := &apiextensionsv1.JSON{Raw: []byte("1")}
	item := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"n": {Type: "integer", Default: one}}}
	spec := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"absent":   {Type: "integer", Default: one},
		"null":     {Type: "integer", Default: one},
		"nullable": {Type: "integer", Default: one, Nullable: true},
		"present":  {Type: "integer", Default: one},
		"list":     {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &item}},
	}}
	s, err := structural(&apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec}})
	if err != nil {
		t.Fatal(err)
	}
	got := obj(t, `{"spec":{"null":null,"nullable":null,"present":5,"list":[{},{"n":2}]}}`)
	applyDefaults(got, s)
	want := obj(t, `{"spec":{"absent":1,"null":1,"nullable":null,"present":5,"list":[{"n":1},{"n":2}]}}`)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("applyDefaults (-want +got):\n%s", diff)
	}
}
