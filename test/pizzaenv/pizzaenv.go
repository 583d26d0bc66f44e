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

// Package pizzaenv runs the sample Pizza API in an envtest control plane:
// the conversion webhook in-process (stoppable, to simulate an outage), the
// CRD stages of config/samples/pizza pointed at it, and sample objects. The
// operator's suites and `make demo` use it.
package pizzaenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io/fs"
	"net"
	"strconv"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	pizzasamples "github.com/graduator/graduator/config/samples/pizza"
	v1 "github.com/graduator/graduator/conversion/v1"
	"github.com/graduator/graduator/conversion/v1alpha1"
	"github.com/graduator/graduator/conversion/v1beta1"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/webhooks"
)

// CRDName is the sample CRD's name.
const CRDName = "pizzas.restaurant.example.com"

// AddToScheme registers every version of the Pizza API.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, v1beta1.AddToScheme, v1.AddToScheme} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

// Resource is the Pizza resource at a version.
func Resource(version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "restaurant.example.com", Version: version, Resource: "pizzas"}
}

// Stage returns the committed CRD manifest of stage n (1 to 6).
func Stage(n int) (*apiextensionsv1.CustomResourceDefinition, error) {
	matches, err := fs.Glob(pizzasamples.Stages, strconv.Itoa(n)+"-*.yaml")
	if err != nil || len(matches) != 1 {
		return nil, fmt.Errorf("no Pizza CRD stage %d in config/samples/pizza", n)
	}
	data, err := pizzasamples.Stages.ReadFile(matches[0])
	if err != nil {
		return nil, err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		return nil, fmt.Errorf("decode %s: %w", matches[0], err)
	}
	return &crd, nil
}

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

// WaitServed waits until the CRD is established and every served version
// answers a LIST: envtestutil.WaitServed.
func WaitServed(ctx context.Context, c client.Client, dyn dynamic.Interface, name string) error {
	return envtestutil.WaitServed(ctx, c, dyn, name)
}

var (
	sauces   = []string{"tomato", "cream", "pesto"}
	sizes    = []string{"small", "medium", "large"}
	toppings = [][]string{{"mozzarella", "basil"}, {"ham", "pineapple"}, {"mushrooms"}, nil, {"olives", "anchovies", "capers"}}
)

// SampleV1alpha1 returns the i-th sample Pizza, at v1alpha1, in namespace
// default.
func SampleV1alpha1(i int) *v1alpha1.Pizza {
	return &v1alpha1.Pizza{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pizza-%05d", i), Namespace: "default",
			Labels: map[string]string{"restaurant.example.com/table": strconv.Itoa(i % 12)}},
		Spec: v1alpha1.PizzaSpec{Sauce: sauces[i%len(sauces)], Size: sizes[i%len(sizes)], Toppings: toppings[i%len(toppings)]},
	}
}
