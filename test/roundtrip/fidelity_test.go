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

package roundtrip_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/graduator/graduator/internal/roundtrip"
)

// corpusFields are the schema features the API server applies around a
// conversion: a default (1, where a lossy conversion drops a 0), a
// nullable field, a field that keeps unknown fields, an embedded resource,
// an int-or-string, an enum.
var corpusFields = map[string]apiextensionsv1.JSONSchemaProps{
	"replicas": {Type: "integer", Default: &apiextensionsv1.JSON{Raw: []byte("1")}},
	"paused":   {Type: "boolean"},
	"tier":     {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"gold"`)}, {Raw: []byte(`"silver"`)}, {Raw: []byte(`"legacy"`)}}},
	"note":     {Type: "string", Nullable: true},
	"mode":     {Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"auto"`)}, Nullable: true},
	"extra":    {Type: "object", XPreserveUnknownFields: ptrTo(true)},
	"template": {Type: "object", XEmbeddedResource: true, XPreserveUnknownFields: ptrTo(true)},
	"port":     {XIntOrString: true},
	"region":   uniqueFields["region"],
	"instance": {Type: "string"},
	"arch":     {Type: "string"},
}

func ptrTo[T any](v T) *T { return &v }

// corpusSpec is gadget i of the corpus: every feature in several shapes
// (a null, a zero, both forms of an int-or-string, nested unknown fields,
// an embedded object with its metadata), and the values the lossy
// conversions drop here and there.
func corpusSpec(i int) map[string]any {
	spec := map[string]any{"color": "red", "replicas": int64(i % 4), "paused": i%3 == 0,
		"tier": []string{"gold", "silver", "legacy"}[i%3], "region": region(i % 40),
		"instance": []string{"small", "xl"}[i%2], "arch": []string{"amd64", "arm64", "arm64"}[i%3]}
	if i%7 == 0 {
		spec["legacy"] = "only v1 has it (with strategy None)"
	}
	switch i % 5 {
	case 0:
		spec["note"] = nil
		spec["mode"] = nil
	case 1:
		spec["note"] = "a note"
		spec["port"] = int64(8080)
	case 2:
		spec["port"] = "http"
		spec["extra"] = map[string]any{"free": map[string]any{"nested": []any{int64(1), "two", nil}}, "empty": map[string]any{}}
	case 3:
		spec["template"] = map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("cm-%d", i), "labels": map[string]any{"app": "x"}},
			"data":     map[string]any{"k": "v"}}
	case 4:
		spec["mode"] = "manual"
		spec["extra"] = map[string]any{"zero": int64(0), "no": false}
	}
	return spec
}

// The proof asks the conversion webhook directly and emulates what the API
// server does around it (each version's pruning and defaulting, the
// metadata it keeps). That emulation is checked here against the API
// server itself: for each conversion of the corpus, the proof of every
// object through the webhook asked directly and through dry-run writes
// (the API server's own path) find the same losses on the same objects.
var _ = Describe("The direct path against the API server's own", func() {
	const corpusSize = 120

	directAndDryRun := func(ctx context.Context, g gadgets) (roundtrip.Result, roundtrip.Result) {
		GinkgoHelper()
		g.create(ctx, corpusSize, corpusSpec)
		g.switchStorage(ctx)
		direct := prove(ctx, g, roundtrip.Options{})
		Expect(direct.Source).NotTo(Equal(roundtrip.SourceDryRun))
		dryRun := prove(ctx, g, roundtrip.Options{Source: roundtrip.SourceDryRun})
		Expect(dryRun.Source).To(Equal(roundtrip.SourceDryRun))
		return direct, dryRun
	}
	// losses are a result's losses without the counts only a sample or a
	// source changes: the path, the objects that lose it, which ones.
	losses := func(r roundtrip.Result) []string {
		var out []string
		for _, v := range r.Versions {
			Expect(v.Sampled).To(Equal(corpusSize))
			for _, l := range v.Losses {
				out = append(out, fmt.Sprintf("%s %s on %d of %d: %v", v.Version, l.Path, l.Objects, l.Carriers, l.Examples))
			}
		}
		return out
	}

	DescribeTable("finds what the API server's dry run finds",
		func(ctx SpecContext, args []string, lost []string) {
			var g gadgets
			if args == nil {
				g = newGadgets(ctx, nil, corpusFields)
			} else {
				w := startWebhookWith(args...)
				g = newGadgets(ctx, &w, corpusFields)
			}
			direct, dryRun := directAndDryRun(ctx, g)
			Expect(losses(direct)).To(Equal(losses(dryRun)))
			Expect(direct.LostPaths()).To(ConsistOf(lost))
		},
		Entry("a lossless webhook", []string{}, []string{}),
		Entry("a webhook dropping a 0 (defaulted back to 1), a false and an enum value", []string{"--lossy-values"},
			[]string{"/spec/paused", "/spec/replicas", "/spec/tier"}),
		Entry("a webhook dropping one value of forty and one pair of values", []string{"--lossy-unique"},
			[]string{"/spec/instance", "/spec/region"}),
		Entry("strategy None, v2 without a field v1 has", nil, []string{"/spec/legacy"}),
	)
})
