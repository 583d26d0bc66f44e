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

// Package webhooks serves the sample Pizza API's conversion webhook, using
// controller-runtime's webhook server (TLS, certificates reloaded when their
// files change) and its hub-and-spoke conversion handler. It is the demo's and
// the suites' (cmd/sample-webhook): importable, not a library, free to change.
package webhooks

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	v1 "github.com/graduator/graduator/conversion/v1"
	"github.com/graduator/graduator/conversion/v1alpha1"
	"github.com/graduator/graduator/conversion/v1beta1"
	"github.com/graduator/graduator/internal/serving"
)

// ConvertPath is where the API server sends ConversionReviews.
const ConvertPath = "/convert"

// pizzaScheme returns a scheme with every version of the Pizza API.
func pizzaScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, v1beta1.AddToScheme, v1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("register the Pizza API: %w", err)
		}
	}
	return scheme, nil
}

// Options configure the conversion webhook server.
type Options struct {
	// Host and Port to listen on; Port 9443 when 0.
	Host string
	Port int
	// CertDir holds tls.crt and tls.key, watched for changes, so that a
	// rotated certificate (cert-manager) is served without a restart.
	CertDir string
	// EnableHTTP2 lets the API server (or anyone) negotiate HTTP/2; off by
	// default (serving.TLSOptions says why). The API server's conversion
	// requests work over HTTP/1.1.
	EnableHTTP2 bool
}

// NewConversionServer returns a webhook server that converts Pizzas at
// ConvertPath. Start it with its Start method.
func NewConversionServer(opts Options) (webhook.Server, error) {
	scheme, err := pizzaScheme()
	if err != nil {
		return nil, err
	}
	port := opts.Port
	if port == 0 {
		port = 9443
	}
	server := webhook.NewServer(webhook.Options{
		Host: opts.Host, Port: port, CertDir: opts.CertDir, TLSOpts: serving.TLSOptions(opts.EnableHTTP2),
	})
	server.Register(ConvertPath, conversion.NewWebhookHandler(scheme, conversion.NewRegistry()))
	return server, nil
}
