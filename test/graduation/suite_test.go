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

// Package graduation_test runs the operator's manager against a real
// kube-apiserver and etcd (envtest) and the sample Pizza conversion webhook,
// and walks CRDs through their graduation driven by CRDVersionPolicies.
package graduation_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/pizzaenv"
)

var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	dyn       dynamic.Interface
	etcd      *envtestutil.EtcdStore
	scheme    = runtime.NewScheme()
)

func TestGraduation(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Graduation suite (operator on envtest)")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(),
		"KUBEBUILDER_ASSETS must point at kube-apiserver and etcd; run the suite with `make test`")

	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	Expect(graduatorv1alpha1.AddToScheme(scheme)).To(Succeed())
	Expect(pizzaenv.AddToScheme(scheme)).To(Succeed())

	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	dyn, err = dynamic.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	etcd, err = envtestutil.NewEtcdStore(testEnv.ControlPlane.Etcd.URL.String())
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if etcd != nil {
		Expect(etcd.Close()).To(Succeed())
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// operator is a running manager with Graduator's controllers.
type operator struct {
	cancel context.CancelFunc
	done   chan struct{}
	// requests records every request the operator sent, in order.
	requests *requestLog
}

// startOperator runs the manager as the binary would, as the suite's admin.
func startOperator() *operator { return startOperatorWith(operatorOptions{}) }

// stop stops the manager the way SIGTERM does and waits until it returned.
func (o *operator) stop() {
	o.cancel()
	Eventually(o.done).WithTimeout(time.Minute).Should(BeClosed())
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// storedAPIVersions reads etcd directly: the apiVersion every object of the
// resource is encoded in, which the API cannot show (it converts).
func storedAPIVersions(ctx context.Context, group, plural string) []string {
	byObject, err := etcd.APIVersions(ctx, group, plural)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	out := make([]string, 0, len(byObject))
	for _, v := range byObject {
		out = append(out, v)
	}
	return out
}
