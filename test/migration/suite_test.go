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
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graduator/graduator/graduationtest"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/envtestutil/envsuite"
)

var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	dyn       dynamic.Interface
	etcd      *graduationtest.EtcdStore
	groups    atomic.Int32
)

func TestMigration(t *testing.T) {
	envsuite.RunSpecs(t, "Migration engine suite (envtest, etcd)")
}

var _ = BeforeSuite(func() {
	env := envsuite.Start(envtestutil.Options{Configure: func(env *envtest.Environment) error {
		// Without the watch cache every LIST reads etcd, so compacting etcd
		// really expires a continue token (the cache can serve old snapshots).
		env.ControlPlane.GetAPIServer().Configure().Set("watch-cache", "false")
		return nil
	}})
	testEnv, cfg, k8sClient, dyn, etcd = env.Environment, env.Config, env.Client, env.Dynamic, env.Etcd
})

var _ = AfterSuite(func() {
	if cli.kubeconfig != "" {
		_ = os.RemoveAll(filepath.Dir(cli.kubeconfig))
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
	crd := envtestutil.WithStatusSubresource(envtestutil.WidgetCRD(group, "v1", "v2"))
	Expect(k8sClient.Create(ctx, crd)).To(Succeed())
	f := &fixture{
		crd: crd, group: group,
		v1: envtestutil.WidgetResource(group, "v1"),
		v2: envtestutil.WidgetResource(group, "v2"),
	}
	Eventually(func() error { return envtestutil.Served(ctx, dyn, crd) }).WithTimeout(30 * time.Second).Should(Succeed())
	f.create(ctx, n)
	return f
}

// create makes n objects at v1, four at a time, in two namespaces.
func (f *fixture) create(ctx context.Context, n int) {
	Expect(envtestutil.CreateObjects(ctx, dyn, f.v1, n, 4, func(i int) *unstructured.Unstructured {
		ns, name := key(i)
		obj := envtestutil.Widget(f.v1, ns, name, map[string]any{"color": "blue", "size": int64(i)})
		obj.SetLabels(map[string]string{"index": fmt.Sprint(i)})
		return obj
	})).To(Succeed())
}

// switchStorage makes v2 the storage version and waits until new writes use it.
func (f *fixture) switchStorage(ctx context.Context) {
	Expect(envtestutil.SetStorageVersion(ctx, k8sClient, f.crd.Name, "v2")).To(Succeed())
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

// resourceVersions maps each widget's namespace/name to its resourceVersion.
func (f *fixture) resourceVersions(ctx context.Context) map[string]string {
	list, err := dyn.Resource(f.v1).List(ctx, metav1.ListOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	rvs := make(map[string]string, len(list.Items))
	for _, obj := range list.Items {
		rvs[obj.GetNamespace()+"/"+obj.GetName()] = obj.GetResourceVersion()
	}
	return rvs
}

// storedCounts returns the distinct apiVersions in etcd with their counts.
func (f *fixture) storedCounts(ctx context.Context) map[string]int {
	counts, err := etcd.Counts(ctx, f.group, "widgets")
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return counts
}

// writeInOldVersion writes objects from..to-1 (every other one) again in
// etcd as they are, stored at v1, as an API server that still takes v1 for
// the storage version would: etcd gets v1 bytes at a new revision. It
// returns their keys.
func (f *fixture) writeInOldVersion(ctx context.Context, from, to int) map[string]bool {
	written := map[string]bool{}
	for i := from; i < to; i += 2 {
		ns, name := key(i)
		k := fmt.Sprintf("%s/%s/widgets/%s/%s", etcd.Prefix, f.group, ns, name)
		got, err := etcd.Client().Get(ctx, k)
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		ExpectWithOffset(1, got.Kvs).To(HaveLen(1))
		ExpectWithOffset(1, string(got.Kvs[0].Value)).To(ContainSubstring(`"apiVersion":"` + f.group + `/v1"`))
		_, err = etcd.Client().Put(ctx, k, string(got.Kvs[0].Value))
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		written[ns+"/"+name] = true
	}
	return written
}

// listRecorder records the continue token of every LIST of widgets.
type listRecorder struct{ envtestutil.ListRecorder }

func (l *listRecorder) config() *rest.Config { return l.Config(cfg) }

func (l *listRecorder) continueTokens() []string { return l.ContinueTokens("widgets") }
