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

package sample

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graduator/graduator/webhooks"
)

// Webhook is the sample conversion webhook served in this process over TLS
// with a CA of its own, on a fixed local address so it can be stopped and
// started again.
type Webhook struct {
	opts envtest.WebhookInstallOptions

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan error
}

// StartWebhook generates a serving certificate and starts the webhook.
func StartWebhook(ctx context.Context) (*Webhook, error) {
	w := &Webhook{opts: envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1"}}
	if err := w.opts.PrepWithoutInstalling(); err != nil {
		return nil, fmt.Errorf("prepare the webhook certificates: %w", err)
	}
	return w, w.Start(ctx)
}

// Start serves conversions until Stop (or ctx ends), waiting until the
// server accepts connections.
func (w *Webhook) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		return nil
	}
	server, err := webhooks.NewConversionServer(webhooks.Options{
		Host: w.opts.LocalServingHost, Port: w.opts.LocalServingPort, CertDir: w.opts.LocalServingCertDir,
	})
	if err != nil {
		return err
	}
	serveCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.cancel, w.done = cancel, make(chan error, 1)
	go func(done chan<- error) { done <- server.Start(serveCtx) }(w.done)

	addr := net.JoinHostPort(w.opts.LocalServingHost, strconv.Itoa(w.opts.LocalServingPort))
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		// A full TLS handshake, trusting the webhook's own CA, so the server
		// logs no aborted handshakes.
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(w.opts.LocalServingCAData)
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		if err != nil {
			return false, nil
		}
		_ = conn.Close()
		return true, nil
	})
}

// Stop stops serving and waits until the port is closed: the API server's
// conversions then fail as in a webhook outage.
func (w *Webhook) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel == nil {
		return
	}
	w.cancel()
	<-w.done
	w.cancel, w.done = nil, nil
}

// URL is where the API server reaches the webhook.
func (w *Webhook) URL() string {
	return fmt.Sprintf("https://%s%s", net.JoinHostPort(w.opts.LocalServingHost, strconv.Itoa(w.opts.LocalServingPort)), webhooks.ConvertPath)
}

// PointConversionAt makes a Webhook-conversion CRD call this webhook instead
// of the in-cluster Service of the manifest.
func (w *Webhook) PointConversionAt(crd *apiextensionsv1.CustomResourceDefinition) {
	if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
		return
	}
	url := w.URL()
	crd.Spec.Conversion.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: w.opts.LocalServingCAData}
}
