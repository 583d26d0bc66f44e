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

// Package upgrade rehearses the Book API's upgrade from v1 to v2 in envtest:
// the releases' CRDs in order, books created at both versions, the
// conversion webhook of internal/webhook served by a manager, and the proof
// that every book reads the same at every version after the graduation.
package upgrade

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/graduator/graduator/graduationtest"

	v1 "github.com/graduator/graduator/examples/api/v1"
	v2 "github.com/graduator/graduator/examples/api/v2"
	bookwebhook "github.com/graduator/graduator/examples/internal/webhook"
)

const crdName = "books.bookstore.example.com"

var (
	env    *envtest.Environment
	scheme = runtime.NewScheme()
)

// TestMain starts kube-apiserver and etcd (KUBEBUILDER_ASSETS) and a
// manager that serves the conversion webhook, runs the tests, and stops
// everything.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Println("KUBEBUILDER_ASSETS is not set: skipping the envtest rehearsal")
		return 0
	}
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1.AddToScheme, v2.AddToScheme} {
		if err := add(scheme); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	env = &envtest.Environment{WebhookInstallOptions: envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1"}}
	cfg, err := env.Start()
	if err != nil {
		fmt.Println("start the control plane:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped, err := startWebhook(ctx, cfg)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer func() { cancel(); <-stopped }()
	return m.Run()
}

// startWebhook runs a manager serving the conversion webhook on envtest's
// serving certificate, and returns once it accepts connections.
func startWebhook(ctx context.Context, cfg *rest.Config) (<-chan struct{}, error) {
	opts := env.WebhookInstallOptions
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: opts.LocalServingHost, Port: opts.LocalServingPort, CertDir: opts.LocalServingCertDir,
		}),
	})
	if err != nil {
		return nil, err
	}
	if err := bookwebhook.SetupBookWebhookWithManager(mgr); err != nil {
		return nil, err
	}
	// The release with a conversion bug (lossy_test.go).
	mgr.GetWebhookServer().Register(lossyPath, lossyConversion{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := mgr.Start(ctx); err != nil {
			fmt.Println("manager:", err)
		}
	}()
	addr := net.JoinHostPort(opts.LocalServingHost, strconv.Itoa(opts.LocalServingPort))
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := mgr.GetWebhookServer().StartedChecker()(nil); err == nil {
			return stopped, nil
		}
	}
	return stopped, fmt.Errorf("the webhook server at %s did not start", addr)
}

// stage reads a release's CRD and points its conversion at the webhook
// served here instead of the in-cluster Service of the manifest.
func stage(t *testing.T, file string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	return stageConvertingAt(t, file, "/convert")
}

// stageConvertingAt is stage with the conversion at path of the webhook
// server.
func stageConvertingAt(t *testing.T, file, path string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crds, err := graduationtest.LoadCRDs(filepath.Join("..", "..", "config", "crd", "stages", file))
	if err != nil {
		t.Fatal(err)
	}
	opts := env.WebhookInstallOptions
	url := fmt.Sprintf("https://%s%s", net.JoinHostPort(opts.LocalServingHost, strconv.Itoa(opts.LocalServingPort)), path)
	for _, crd := range crds {
		if c := crd.Spec.Conversion; c != nil && c.Strategy == apiextensionsv1.WebhookConverter {
			c.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: opts.LocalServingCAData}
		}
	}
	return crds
}

func TestEveryBookSurvivesTheUpgradeToV2(t *testing.T) {
	ctx := t.Context()
	r := graduationtest.New(t, env, graduationtest.Options{Scheme: scheme})

	r.Install(ctx, stage(t, "1-v1.yaml")...)
	for i, title := range []string{"Dune", "Solaris", "Roadside Picnic"} {
		r.Create(ctx, &v1.Book{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("v1-%d", i)},
			Spec:       v1.BookSpec{Title: title, Author: "Author " + strconv.Itoa(i)},
		})
	}

	r.Install(ctx, stage(t, "2-add-v2.yaml")...)
	// Books created at v2 while v1 is stored: what v1 cannot hold must
	// survive in storage (the conversion stashes it).
	r.Create(ctx, &v2.Book{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "v2-0"},
		Spec:       v2.BookSpec{Title: "Good Omens", Authors: []string{"Terry Pratchett", "Neil Gaiman"}, ISBN: "978-0060853976"},
	})
	snap := r.Snapshot(ctx, crdName)

	err := r.ApplyStage(ctx, stage(t, "3-drop-v1.yaml")...)
	if err == nil || !strings.Contains(err.Error(), "storedVersions") {
		t.Fatalf("release 3 was not refused while books are stored as v1: %v", err)
	}

	report := r.Graduate(ctx, crdName, "v2")
	t.Log(report)
	r.Verify(ctx, snap)

	if err := r.ApplyStage(ctx, stage(t, "3-drop-v1.yaml")...); err != nil {
		t.Fatalf("release 3 refused after the graduation: %v", err)
	}
	r.Verify(ctx, snap) // at v2 only now
}
