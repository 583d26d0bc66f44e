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
	"time"

	"k8s.io/client-go/rest"
)

// ConversionReviews is how many ConversionReviews the API server sent to
// the conversion webhook of the CRD named crd since it started, by its own
// count (apiserver_crd_conversion_webhook_duration_seconds, one
// observation per request to the webhook, whatever its outcome).
func ConversionReviews(ctx context.Context, cfg *rest.Config, crd string) (float64, error) {
	byDirection, err := ConversionReviewsByDirection(ctx, cfg, crd)
	var n float64
	for _, count := range byDirection {
		n += count
	}
	return n, err
}

// ConversionReviewsByDirection is ConversionReviews split by the versions
// converted, keyed "from->to".
func ConversionReviewsByDirection(ctx context.Context, cfg *rest.Config, crd string) (map[string]float64, error) {
	families, err := APIServerMetrics(ctx, cfg)
	if err != nil {
		return nil, err
	}
	byDirection := map[string]float64{}
	for _, m := range families["apiserver_crd_conversion_webhook_duration_seconds"].GetMetric() {
		if labels := Labels(m); labels["crd_name"] == crd {
			byDirection[labels["from_version"]+"->"+labels["to_version"]] += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return byDirection, nil
}

// WaitConversionsQuiet waits until the API server has sent the conversion
// webhook of the CRD named crd no ConversionReview for two seconds. After a
// storage version switch the API server rebuilds the CRD's watch caches in
// the background and converts every object once to fill them: counted in a
// measurement's window, that work would read as the measured run's.
func WaitConversionsQuiet(ctx context.Context, cfg *rest.Config, crd string) error {
	last, err := ConversionReviews(ctx, cfg, crd)
	if err != nil {
		return err
	}
	for quiet, deadline := 0, time.Now().Add(time.Minute); quiet < 4; {
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server still converts %s a minute on", crd)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		now, err := ConversionReviews(ctx, cfg, crd)
		if err != nil {
			return err
		}
		if now == last {
			quiet++
		} else {
			quiet = 0
		}
		last = now
	}
	return nil
}
