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
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// webhookTimeout is how long the API server waits for a conversion webhook.
const webhookTimeout = 30 * time.Second

// reviewBatch bounds the objects of one ConversionReview, as a LIST page
// converted by the API server would.
const reviewBatch = 100

// converter is a CRD's conversion as the API server runs it, before the
// storage version is the target: the conversion webhook, or with strategy
// None a rewrite of apiVersion, followed by the pruning and the defaulting
// by the schema of the version converted to.
type converter struct {
	group string
	// webhook is nil for strategy None.
	webhook *webhookClient
	// schemas are the structural schemas of the versions, by name; a
	// version without one (preserveUnknownFields) is not pruned.
	schemas map[string]*structuralschema.Structural
}

// converted is the source before the storage switch: each object converted
// from its old version to the target and back, as the API server would on
// writing it after the switch and reading it at the old version.
type converted struct {
	conv        *converter
	old, target string
}

// reviewsInFlight bounds the batches of one page converted at once: the
// API server itself sends a webhook one review per request in flight, and
// a page of paging.DefaultPageSize objects is twenty batches.
const reviewsInFlight = 4

func (c converted) roundTrip(ctx context.Context, objs []*unstructured.Unstructured) ([]pair, error) {
	batches := (len(objs) + reviewBatch - 1) / reviewBatch
	backs := make([][]*unstructured.Unstructured, batches)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(reviewsInFlight)
	for i := range batches {
		if gctx.Err() != nil {
			break // a batch failed: the others take no more work
		}
		g.Go(func() error {
			batch := objs[i*reviewBatch : min((i+1)*reviewBatch, len(objs))]
			there, err := c.conv.convert(gctx, batch, c.target)
			if err != nil {
				return fmt.Errorf("convert %s to %s: %w", c.old, c.target, err)
			}
			back, err := c.conv.convert(gctx, there, c.old)
			if err != nil {
				return fmt.Errorf("convert %s back to %s: %w", c.target, c.old, err)
			}
			backs[i] = back
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make([]pair, 0, len(objs))
	for i, back := range backs {
		for j, b := range back {
			out = append(out, pair{a: objs[i*reviewBatch+j], b: b})
		}
	}
	return out, nil
}

// errUnreachable marks a webhook this process could not send a review to
// (no route, no name, refused): not an answer of the webhook.
var errUnreachable = errors.New("the conversion webhook cannot be reached from this process")

// newConverter reads the CRD's conversion strategy, its webhook's
// clientConfig and every version's schema.
func newConverter(crd *apiextensionsv1.CustomResourceDefinition, transport func(http.RoundTripper) http.RoundTripper) (*converter, error) {
	c := &converter{group: crd.Spec.Group, schemas: map[string]*structuralschema.Structural{}}
	for _, v := range crd.Spec.Versions {
		if crd.Spec.PreserveUnknownFields || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		s, err := structural(v.Schema.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("schema of %s: %w", v.Name, err)
		}
		c.schemas[v.Name] = s
	}
	if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
		return c, nil
	}
	w, err := newWebhookClient(crd.Spec.Conversion.Webhook, transport)
	if err != nil {
		return nil, fmt.Errorf("conversion webhook of %s: %w", crd.Name, err)
	}
	c.webhook = w
	return c, nil
}

// structural is the structural schema the API server prunes with.
func structural(props *apiextensionsv1.JSONSchemaProps) (*structuralschema.Structural, error) {
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(props, internal, nil); err != nil {
		return nil, err
	}
	return structuralschema.NewStructural(internal)
}

// convert converts objs to version and prunes them by its schema. It
// returns new objects; objs are not changed.
func (c *converter) convert(ctx context.Context, objs []*unstructured.Unstructured, version string) ([]*unstructured.Unstructured, error) {
	apiVersion := c.group + "/" + version
	var out []*unstructured.Unstructured
	if c.webhook == nil {
		for _, o := range objs {
			obj := o.DeepCopy()
			obj.SetAPIVersion(apiVersion)
			out = append(out, obj)
		}
	} else {
		var err error
		if out, err = c.webhook.convert(ctx, objs, apiVersion); err != nil {
			return nil, err
		}
	}
	if s := c.schemas[version]; s != nil {
		for _, obj := range out {
			pruning.Prune(obj.Object, s, true)
			// The API server defaults what it reads at a version: a zero
			// the conversion dropped comes back as the schema's default.
			applyDefaults(obj.Object, s)
		}
	}
	return out, nil
}

// applyDefaults sets, in v, each field s defaults that v lacks, or holds
// as a null s does not allow, as the API server does when it reads an
// object at a version. The API server's own function lives in a package
// that also holds the schema's CEL validation, which every door (the
// libraries too) would then link; the rule is this walk.
func applyDefaults(v any, s *structuralschema.Structural) {
	if s == nil {
		return
	}
	fill := func(cur any, ok bool, field *structuralschema.Structural) (any, bool) {
		if field == nil || field.Default.Object == nil || ok && (cur != nil || field.Nullable) {
			return cur, false
		}
		return runtime.DeepCopyJSONValue(field.Default.Object), true
	}
	switch v := v.(type) {
	case map[string]any:
		for name := range s.Properties {
			field := s.Properties[name]
			cur, ok := v[name]
			if d, set := fill(cur, ok, &field); set {
				v[name] = d
			}
		}
		for name, cur := range v {
			field, ok := s.Properties[name]
			switch {
			case ok:
				applyDefaults(cur, &field)
			case s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil:
				if d, set := fill(cur, true, s.AdditionalProperties.Structural); set {
					v[name] = d
				}
				applyDefaults(v[name], s.AdditionalProperties.Structural)
			}
		}
	case []any:
		for i := range v {
			if d, set := fill(v[i], true, s.Items); set {
				v[i] = d
			}
			applyDefaults(v[i], s.Items)
		}
	}
}

// webhookClient sends ConversionReviews to a CRD's conversion webhook.
type webhookClient struct {
	url           string
	client        *http.Client
	transport     *http.Transport
	reviewVersion string
}

func newWebhookClient(conv *apiextensionsv1.WebhookConversion, transport func(http.RoundTripper) http.RoundTripper) (*webhookClient, error) {
	if conv == nil || conv.ClientConfig == nil {
		return nil, errors.New("no clientConfig")
	}
	w := &webhookClient{}
	for _, v := range conv.ConversionReviewVersions {
		// v1beta1's ConversionReview has the same fields as v1's.
		if v == "v1" || v == "v1beta1" && w.reviewVersion == "" {
			w.reviewVersion = v
		}
	}
	if w.reviewVersion == "" {
		return nil, fmt.Errorf("none of the conversionReviewVersions %v is v1 or v1beta1", conv.ConversionReviewVersions)
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(conv.ClientConfig.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(conv.ClientConfig.CABundle) {
			return nil, errors.New("caBundle holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	switch cc := conv.ClientConfig; {
	case cc.URL != nil:
		w.url = *cc.URL
	case cc.Service != nil:
		port := int32(443)
		if cc.Service.Port != nil {
			port = *cc.Service.Port
		}
		host := cc.Service.Name + "." + cc.Service.Namespace + ".svc"
		u := url.URL{Scheme: "https", Host: host + ":" + strconv.Itoa(int(port))}
		if cc.Service.Path != nil {
			u.Path = *cc.Service.Path
		}
		w.url = u.String()
		// The API server checks the certificate against the service's DNS name.
		tlsConfig.ServerName = host
	default:
		return nil, errors.New("clientConfig has neither url nor service")
	}
	w.transport = &http.Transport{TLSClientConfig: tlsConfig, Proxy: http.ProxyFromEnvironment, IdleConnTimeout: 30 * time.Second}
	var rt http.RoundTripper = w.transport
	if transport != nil {
		rt = transport(rt)
	}
	w.client = &http.Client{Transport: rt, Timeout: webhookTimeout}
	return w, nil
}

// unreachable reports an error of the connection, not of an answer: a name
// that does not resolve (a Service's name outside the cluster), a refused
// or unroutable dial.
func unreachable(err error) bool {
	var dns *net.DNSError
	var op *net.OpError
	return errors.As(err, &dns) || errors.As(err, &op) && op.Op == "dial"
}

// close closes the idle connections to the webhook: a proof builds its
// client from the CRD each time, and a long-running operator proves many.
func (c *converter) close() {
	if c != nil && c.webhook != nil {
		c.webhook.transport.CloseIdleConnections()
	}
}

// review is a ConversionReview of apiextensions.k8s.io v1 or v1beta1 (the
// same fields).
type review struct {
	metav1.TypeMeta `json:",inline"`
	Request         *apiextensionsv1.ConversionRequest  `json:"request,omitempty"`
	Response        *apiextensionsv1.ConversionResponse `json:"response,omitempty"`
}

// convert sends objs in one ConversionReview and returns the converted
// objects with the metadata the API server keeps: the originals', but
// labels and annotations from the webhook.
func (w *webhookClient) convert(ctx context.Context, objs []*unstructured.Unstructured, apiVersion string) ([]*unstructured.Unstructured, error) {
	req := review{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/" + w.reviewVersion, Kind: "ConversionReview"},
		Request:  &apiextensionsv1.ConversionRequest{UID: uuid.NewUUID(), DesiredAPIVersion: apiVersion},
	}
	for _, o := range objs {
		raw, err := o.MarshalJSON()
		if err != nil {
			return nil, err
		}
		req.Request.Objects = append(req.Request.Objects, runtime.RawExtension{Raw: raw})
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Accept", "application/json")
	resp, err := w.client.Do(httpReq)
	if err != nil {
		if ctx.Err() == nil && unreachable(err) {
			err = fmt.Errorf("%w (%s): %w", errUnreachable, w.url, err)
		}
		return nil, fmt.Errorf("call the conversion webhook: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read the conversion webhook's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the conversion webhook answered %s: %.200s", resp.Status, data)
	}
	var answer review
	if err := json.Unmarshal(data, &answer); err != nil {
		return nil, fmt.Errorf("decode the conversion webhook's answer: %w", err)
	}
	return takeAnswer(req.Request, answer.Response, objs, apiVersion)
}

// takeAnswer checks a ConversionResponse as the API server does (its uid,
// a Success result, one object per object sent, each at apiVersion) and
// restores each object's metadata but labels and annotations.
func takeAnswer(req *apiextensionsv1.ConversionRequest, resp *apiextensionsv1.ConversionResponse,
	objs []*unstructured.Unstructured, apiVersion string) ([]*unstructured.Unstructured, error) {
	switch {
	case resp == nil:
		return nil, errors.New("the conversion webhook's answer has no response")
	case resp.UID != req.UID:
		return nil, fmt.Errorf("the conversion webhook answered uid %q to uid %q", resp.UID, req.UID)
	case resp.Result.Status != metav1.StatusSuccess:
		return nil, fmt.Errorf("the conversion webhook failed: %s", resp.Result.Message)
	case len(resp.ConvertedObjects) != len(objs):
		return nil, fmt.Errorf("the conversion webhook returned %d objects for %d", len(resp.ConvertedObjects), len(objs))
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, raw := range resp.ConvertedObjects {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(raw.Raw); err != nil {
			return nil, fmt.Errorf("decode converted object %d: %w", i, err)
		}
		if obj.GetAPIVersion() != apiVersion {
			return nil, fmt.Errorf("the conversion webhook returned %s for %s", obj.GetAPIVersion(), apiVersion)
		}
		restoreMetadata(objs[i], obj)
		out[i] = obj
	}
	return out, nil
}

// restoreMetadata gives converted the original's metadata, but for the
// labels and annotations the webhook returned: the only metadata a
// conversion may change.
func restoreMetadata(original, converted *unstructured.Unstructured) {
	labels, annotations := converted.GetLabels(), converted.GetAnnotations()
	meta, _ := runtime.DeepCopyJSONValue(original.Object["metadata"]).(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	converted.Object["metadata"] = meta
	converted.SetLabels(labels)
	converted.SetAnnotations(annotations)
}
