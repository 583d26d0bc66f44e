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

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// APIServerMetrics reads and parses the API server's /metrics, by family
// name.
func APIServerMetrics(ctx context.Context, cfg *rest.Config) (map[string]*dto.MetricFamily, error) {
	c, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	body, err := c.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the API server's metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		return nil, fmt.Errorf("parse the API server's metrics: %w", err)
	}
	return families, nil
}

// Labels are a metric's labels by name.
func Labels(m *dto.Metric) map[string]string {
	labels := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	return labels
}

// RequestsByVerb is, by verb, how many requests for resource of group the
// API server answered since it started (apiserver_request_total, every
// response code and subresource).
func RequestsByVerb(families map[string]*dto.MetricFamily, group, resource string) map[string]float64 {
	byVerb := map[string]float64{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		if labels := Labels(m); labels["group"] == group && labels["resource"] == resource {
			byVerb[labels["verb"]] += m.GetCounter().GetValue()
		}
	}
	return byVerb
}
