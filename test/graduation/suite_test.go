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
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/controllers"
	"github.com/graduator/graduator/test/etcdstore"
	"github.com/graduator/graduator/test/pizzaenv"
)

var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	dyn       dynamic.Interface
	etcd      *etcdstore.Store
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
	etcd, err = etcdstore.New(testEnv.ControlPlane.Etcd.URL.String())
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
	// lists records the continue token of every LIST of custom resources the
	// operator sent, in order.
	lists *listRecorder
}

// startOperator runs the manager as the binary would, until stop.
func startOperator() *operator {
	lists := &listRecorder{}
	opCfg := rest.CopyConfig(cfg)
	opCfg.WrapTransport = lists.wrap

	mgr, err := ctrl.NewManager(opCfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Specs start and stop several managers in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	opDyn, err := dynamic.NewForConfig(opCfg)
	Expect(err).NotTo(HaveOccurred())
	disco, err := discovery.NewDiscoveryClientForConfig(opCfg)
	Expect(err).NotTo(HaveOccurred())
	recorder := mgr.GetEventRecorder("graduator")
	Expect((&controllers.CRDVersionPolicyReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Dynamic: opDyn, Discovery: disco, Recorder: recorder, MaxConcurrentReconciles: 2,
	}).SetupWithManager(mgr)).To(Succeed())
	Expect((&controllers.DriftReporter{Client: mgr.GetClient(), Recorder: recorder}).SetupWithManager(mgr)).To(Succeed())

	ctx, cancel := context.WithCancel(context.Background())
	op := &operator{cancel: cancel, done: make(chan struct{}), lists: lists}
	go func() {
		defer GinkgoRecover()
		defer close(op.done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	return op
}

// stop stops the manager the way SIGTERM does and waits until it returned.
func (o *operator) stop() {
	o.cancel()
	Eventually(o.done).WithTimeout(time.Minute).Should(BeClosed())
}

// listRecorder records the LIST requests of custom resources.
type listRecorder struct {
	mu    sync.Mutex
	calls []listCall
}

type listCall struct {
	path, continueToken string
}

func (l *listRecorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodGet && strings.HasPrefix(req.URL.Path, "/apis/") && req.URL.Query().Has("limit") {
			l.mu.Lock()
			l.calls = append(l.calls, listCall{path: req.URL.Path, continueToken: req.URL.Query().Get("continue")})
			l.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// of returns the recorded LISTs whose path ends with the resource's plural.
func (l *listRecorder) of(plural string) []listCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []listCall
	for _, c := range l.calls {
		if strings.HasSuffix(c.path, "/"+plural) {
			out = append(out, c)
		}
	}
	return out
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
