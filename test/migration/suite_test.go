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

// Package migration_test proves the storage migration engine at the etcd
// level: it reads what the API server stored, since reading through the API
// shows only converted objects.
package migration_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graduator/graduator/test/etcdstore"
)

var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	dyn       dynamic.Interface
	etcd      *etcdstore.Store
	groups    atomic.Int32
)

func TestMigration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Migration engine suite (envtest, etcd)")
}

var _ = BeforeSuite(func() {
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(),
		"KUBEBUILDER_ASSETS must point at kube-apiserver and etcd; run the suite with `make test`")
	testEnv = &envtest.Environment{}
	// Without the watch cache every LIST reads etcd, so compacting etcd
	// really expires a continue token (the cache can serve old snapshots).
	testEnv.ControlPlane.GetAPIServer().Configure().Set("watch-cache", "false")
	var err error
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
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

// fixture is a fresh CRD with versions v1 (storage) and v2 of one schema,
// and objects created at v1.
type fixture struct {
	crd    *apiextensionsv1.CustomResourceDefinition
	group  string
	v1, v2 schema.GroupVersionResource
}

// newFixture installs a CRD in a group of its own and creates n objects.
func newFixture(ctx context.Context, n int) *fixture {
	group := fmt.Sprintf("m%d.migration.test.graduator.io", groups.Add(1))
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget", ListKind: "WidgetList", Singular: "widget"},
			Scope: apiextensionsv1.NamespaceScoped,
		},
	}
	for _, v := range []string{"v1", "v2"} {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v, Served: true, Storage: v == "v1",
			Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"color": {Type: "string"}, "size": {Type: "integer"},
					}},
					"status": {Type: "object", XPreserveUnknownFields: ptrTrue()},
				},
			}},
		})
	}
	Expect(k8sClient.Create(ctx, crd)).To(Succeed())
	f := &fixture{
		crd: crd, group: group,
		v1: schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"},
		v2: schema.GroupVersionResource{Group: group, Version: "v2", Resource: "widgets"},
	}
	Eventually(func() error {
		_, err := dyn.Resource(f.v2).List(ctx, metav1.ListOptions{Limit: 1})
		return err
	}).WithTimeout(30 * time.Second).Should(Succeed())
	f.create(ctx, n)
	return f
}

func ptrTrue() *bool { t := true; return &t }

// create makes n objects at v1, four at a time, in two namespaces.
func (f *fixture) create(ctx context.Context, n int) {
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			for i := w; i < n; i += 4 {
				ns := []string{"default", "kube-public"}[i%2]
				obj := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": f.v1.GroupVersion().String(), "kind": "Widget",
					"metadata": map[string]any{"name": fmt.Sprintf("w-%05d", i), "namespace": ns, "labels": map[string]any{"index": fmt.Sprint(i)}},
					"spec":     map[string]any{"color": "blue", "size": int64(i)},
				}}
				_, err := dyn.Resource(f.v1).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
				Expect(err).NotTo(HaveOccurred())
			}
		}()
	}
	wg.Wait()
}

// switchStorage makes v2 the storage version and waits until new writes use it.
func (f *fixture) switchStorage(ctx context.Context) {
	var crd apiextensionsv1.CustomResourceDefinition
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(f.crd), &crd)).To(Succeed())
	crd.Spec.Versions[0].Storage, crd.Spec.Versions[1].Storage = false, true
	Expect(k8sClient.Update(ctx, &crd)).To(Succeed())
	// A probe object shows when the API server writes v2.
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": f.v1.GroupVersion().String(), "kind": "Widget",
		"metadata": map[string]any{"name": "probe", "namespace": "kube-system"},
	}}
	_, err := dyn.Resource(f.v1).Namespace("kube-system").Create(ctx, probe, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() string {
		_, err := dyn.Resource(f.v1).Namespace("kube-system").Patch(ctx, "probe", "application/merge-patch+json",
			[]byte(`{"metadata":{"annotations":{"probe":"`+time.Now().String()+`"}}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		return f.stored(ctx)["kube-system/probe"]
	}).WithTimeout(30 * time.Second).Should(Equal(f.group + "/v2"))
	Expect(dyn.Resource(f.v1).Namespace("kube-system").Delete(ctx, "probe", metav1.DeleteOptions{})).To(Succeed())
}

// stored reads etcd: the apiVersion each object is encoded in.
func (f *fixture) stored(ctx context.Context) map[string]string {
	versions, err := etcd.APIVersions(ctx, f.group, "widgets")
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return versions
}

// storedVersionsOf returns the distinct apiVersions in etcd with their counts.
func (f *fixture) storedCounts(ctx context.Context) map[string]int {
	counts := map[string]int{}
	for _, v := range f.stored(ctx) {
		counts[v]++
	}
	return counts
}

// listRecorder records the continue token of every LIST of widgets.
type listRecorder struct {
	mu     sync.Mutex
	tokens []string
}

func (l *listRecorder) config() *rest.Config {
	c := rest.CopyConfig(cfg)
	c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/widgets") {
				l.mu.Lock()
				l.tokens = append(l.tokens, req.URL.Query().Get("continue"))
				l.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	}
	return c
}

func (l *listRecorder) continueTokens() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.tokens...)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
