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

// Package pizzaenv runs the sample Pizza API in an envtest control plane for
// the suites: the sample itself is internal/sample (what `make demo` runs);
// this package names it for the suites and adds what only they need.
package pizzaenv

import (
	"context"

	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graduator/graduator/internal/sample"
	"github.com/graduator/graduator/test/envtestutil"
)

// CRDName is the sample CRD's name.
const CRDName = sample.CRDName

// Webhook is the sample conversion webhook served in this process.
type Webhook = sample.Webhook

var (
	// AddToScheme registers every version of the Pizza API.
	AddToScheme = sample.AddToScheme
	// Resource is the Pizza resource at a version.
	Resource = sample.Resource
	// Stage returns the committed CRD manifest of stage n (1 to 6).
	Stage = sample.Stage
	// StartWebhook generates a serving certificate and starts the webhook.
	StartWebhook = sample.StartWebhook
	// SampleV1alpha1 returns the i-th sample Pizza, at v1alpha1.
	SampleV1alpha1 = sample.SampleV1alpha1
)

// WaitServed waits until the CRD is established and every served version
// answers a LIST: envtestutil.WaitServed.
func WaitServed(ctx context.Context, c client.Client, dyn dynamic.Interface, name string) error {
	return envtestutil.WaitServed(ctx, c, dyn, name)
}
