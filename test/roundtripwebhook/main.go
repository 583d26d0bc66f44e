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

// Command roundtripwebhook is a conversion webhook for the round-trip
// proof's tests: it serves ConversionReview v1 over TLS for the test CRD
// "gadgets" (any group) between v1 and v2, where v1's spec.color is v2's
// spec.colour. With --lossy it drops the optional spec.rare on v1 -> v2, the
// loss the proof must find; without, the conversion keeps every field. With
// --lossy-values it drops, on v1 -> v2, what a typed hub with omitempty on
// a non-pointer field and a switch with a missing case drop: spec.replicas
// when 0, spec.paused when false, spec.tier when it is not gold or silver.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/graduator/graduator/internal/serving"
)

// ConvertPath is where the webhook serves conversions.
const ConvertPath = "/convert"

func main() {
	var (
		host, certDir         string
		port                  int
		lossy, values, unique bool
	)
	flag.StringVar(&host, "host", "127.0.0.1", "Address to listen on.")
	flag.IntVar(&port, "port", 9443, "Port to listen on (TLS).")
	flag.StringVar(&certDir, "cert-dir", "", "Directory with tls.crt and tls.key.")
	flag.BoolVar(&lossy, "lossy", false, "Drop spec.rare on v1 -> v2.")
	flag.BoolVar(&values, "lossy-values", false, "Drop spec.replicas 0, spec.paused false and a spec.tier other than gold or silver on v1 -> v2.")
	flag.BoolVar(&unique, "lossy-unique", false, "Drop spec.region region-37, and spec.instance xl where spec.arch is arm64, on v1 -> v2.")
	flag.Parse()

	server := webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: certDir, TLSOpts: serving.TLSOptions(false)})
	server.Register(ConvertPath, handler{lossy: lossy, lossyValues: values, lossyUnique: unique})
	fmt.Fprintf(os.Stderr, "roundtripwebhook: serving on %s:%d%s, lossy=%v, lossy-values=%v, lossy-unique=%v\n",
		host, port, ConvertPath, lossy, values, unique)
	if err := server.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, "roundtripwebhook:", err)
		os.Exit(1)
	}
}

type handler struct{ lossy, lossyValues, lossyUnique bool }

// review is a ConversionReview; the API server sends v1.
type review struct {
	metav1.TypeMeta `json:",inline"`
	Request         *apiextensionsv1.ConversionRequest  `json:"request,omitempty"`
	Response        *apiextensionsv1.ConversionResponse `json:"response,omitempty"`
}

func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in review
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Request == nil {
		http.Error(w, fmt.Sprintf("not a ConversionReview: %v", err), http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: in.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range in.Request.Objects {
		out, err := h.convert(raw.Raw, in.Request.DesiredAPIVersion)
		if err != nil {
			resp.ConvertedObjects = nil
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
			break
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review{TypeMeta: in.TypeMeta, Response: resp})
}

// convert renames spec.color and spec.colour between v1 and v2; lossy drops
// spec.rare on the way to v2.
func (h handler) convert(raw []byte, apiVersion string) ([]byte, error) {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	from, to := version(obj.GetAPIVersion()), version(apiVersion)
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
	switch {
	case from == to:
	case from == "v1" && to == "v2":
		rename(spec, "color", "colour")
		if h.lossy {
			delete(spec, "rare")
		}
		if h.lossyValues {
			dropValues(spec)
		}
		if h.lossyUnique {
			dropUnique(spec)
		}
	case from == "v2" && to == "v1":
		rename(spec, "colour", "color")
	default:
		return nil, fmt.Errorf("cannot convert %s to %s", obj.GetAPIVersion(), apiVersion)
	}
	if spec != nil {
		if err := unstructured.SetNestedMap(obj.Object, spec, "spec"); err != nil {
			return nil, err
		}
	}
	obj.SetAPIVersion(apiVersion)
	return obj.MarshalJSON()
}

// dropValues drops what a typed v2 with `json:",omitempty"` on a
// non-pointer int and bool would not write (replicas 0, paused false), and
// a tier its switch has no case for.
func dropValues(spec map[string]any) {
	if n, ok := spec["replicas"].(int64); ok && n == 0 {
		delete(spec, "replicas")
	}
	if b, ok := spec["paused"].(bool); ok && !b {
		delete(spec, "paused")
	}
	if _, ok := spec["tier"]; ok {
		switch spec["tier"] {
		case "gold", "silver":
		default:
			delete(spec, "tier")
		}
	}
}

// dropUnique drops what one value of many (region-37) or one pair of
// values (instance xl on arch arm64) triggers.
func dropUnique(spec map[string]any) {
	if spec["region"] == "region-37" {
		delete(spec, "region")
	}
	if spec["instance"] == "xl" && spec["arch"] == "arm64" {
		delete(spec, "instance")
	}
}

func version(apiVersion string) string {
	return apiVersion[strings.LastIndex(apiVersion, "/")+1:]
}

func rename(m map[string]any, from, to string) {
	if v, ok := m[from]; ok {
		m[to] = v
		delete(m, from)
	}
}
