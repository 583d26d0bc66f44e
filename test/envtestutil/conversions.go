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

package envtestutil

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// ConversionReviews is how many ConversionReviews the API server sent to
// the conversion webhook of the CRD named crd since it started, by its own
// count (apiserver_crd_conversion_webhook_duration_seconds, one
// observation per request to the webhook, whatever its outcome).
func ConversionReviews(ctx context.Context, cfg *rest.Config, crd string) (float64, error) {
	c, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return 0, err
	}
	body, err := c.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the API server's metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		return 0, fmt.Errorf("parse the API server's metrics: %w", err)
	}
	var n float64
	for _, m := range families["apiserver_crd_conversion_webhook_duration_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "crd_name" && l.GetValue() == crd {
				n += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return n, nil
}
