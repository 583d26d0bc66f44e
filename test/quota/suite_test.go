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

// Package quota runs the migration engine against an etcd with a small
// space quota and an API server that compacts every 30 s: a scaled-down
// cluster (on a real one: a 2 GiB etcd, 5-minute compactions, about 1 GiB
// of one CRD's objects) where a migration of big objects that does not
// budget its writes fills etcd and makes the cluster read-only.
package quota

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/envtestutil/envsuite"
)

const (
	// quota is etcd's --quota-backend-bytes: 192 MiB, about a tenth of a
	// real cluster's 2 GiB, as the 30 s compactions are a tenth of its 5
	// minutes: the scaled-down cluster of the package's doc.
	quota = 192 << 20
	// compactionInterval is the API server's --etcd-compaction-interval.
	compactionInterval = "30s"
)

var env *envtestutil.Env

func TestQuota(t *testing.T) {
	if os.Getenv("QUOTA_SUITE") == "" {
		t.Skip("about 20 minutes (compaction-paced runs on a 192 MiB etcd, three CLI processes at once among them): run it with `make test-quota` (QUOTA_SUITE=1)")
	}
	envsuite.RunSpecs(t, "etcd space quota suite (envtest, 192 MiB etcd, 30 s compactions)")
}

var _ = BeforeSuite(func() {
	env = envsuite.Start(envtestutil.Options{Unthrottled: true, Configure: func(e *envtest.Environment) error {
		e.ControlPlane.Etcd = &envtest.Etcd{}
		e.ControlPlane.Etcd.Configure().Set("quota-backend-bytes", strconv.Itoa(quota))
		e.ControlPlane.GetAPIServer().Configure().Set("etcd-compaction-interval", compactionInterval)
		return nil
	}})
})

// etcdState is etcd's database size and whether an alarm (NOSPACE) is raised.
func etcdState(ctx context.Context) (int64, []string) {
	c := env.Etcd.Client()
	endpoint := c.Endpoints()[0]
	status, err := c.Status(ctx, endpoint)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	alarms, err := c.AlarmList(ctx)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var raised []string
	for _, a := range alarms.Alarms {
		raised = append(raised, a.Alarm.String())
	}
	return status.DbSize, raised
}

// peakMonitor samples etcd's database size until stopped: the peak, and
// the alarms seen.
type peakMonitor struct {
	stop   context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	peak   int64
	alarms []string
}

func watchPeak(ctx context.Context) *peakMonitor {
	ctx, stop := context.WithCancel(ctx)
	m := &peakMonitor{stop: stop, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(m.done)
		for ctx.Err() == nil {
			status, err := env.Etcd.Client().Status(ctx, env.Etcd.Client().Endpoints()[0])
			if err == nil {
				m.mu.Lock()
				m.peak = max(m.peak, status.DbSize)
				m.alarms = append(m.alarms, status.Errors...)
				m.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return m
}

func (m *peakMonitor) finish() int64 {
	m.stop()
	<-m.done
	return m.peak
}

// population is a widget CRD of its own with objects whose spec.notes make
// them the given size; their content is a function of their index, so a
// test can prove none lost.
type population struct {
	crd    *apiextensionsv1.CustomResourceDefinition
	group  string
	v1, v2 schema.GroupVersionResource
	n      int
	size   int
}

func newPopulation(ctx context.Context, name string, size int) *population {
	group := name + ".quota.test.graduator.io"
	crd := envtestutil.WidgetCRD(group, "v1", "v2")
	Expect(env.Client.Create(ctx, crd)).To(Succeed())
	Expect(envtestutil.WaitServed(ctx, env.Client, env.Dynamic, crd.Name)).To(Succeed())
	return &population{crd: crd, group: group, v1: envtestutil.WidgetResource(group, "v1"), v2: envtestutil.WidgetResource(group, "v2"), size: size}
}

// namespaces are those envtest has (it runs no namespace controller).
var namespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

func (p *population) name(i int) (string, string) {
	return namespaces[i%len(namespaces)], fmt.Sprintf("w-%06d", i)
}

// notes is object i's content: size bytes that differ from object to object.
func (p *population) notes(i int) string {
	seed := fmt.Sprintf("%06d-%s-", i, p.group)
	out := make([]byte, 0, p.size)
	for len(out) < p.size {
		out = append(out, seed...)
	}
	return string(out[:p.size])
}

// grow creates n more objects at v1.
func (p *population) grow(ctx context.Context, n int) {
	from := p.n
	Expect(envtestutil.CreateObjects(ctx, env.Dynamic, p.v1, n, 8, func(i int) *unstructured.Unstructured {
		ns, name := p.name(from + i)
		return envtestutil.Widget(p.v1, ns, name, map[string]any{"color": "blue", "size": int64(from + i), "notes": p.notes(from + i)})
	})).To(Succeed())
	p.n += n
}

// growTo creates objects until etcd's database reaches target bytes.
func (p *population) growTo(ctx context.Context, target int64, batch int) {
	for {
		size, alarms := etcdState(ctx)
		Expect(alarms).To(BeEmpty())
		if size >= target {
			return
		}
		p.grow(ctx, batch)
	}
}

// switchStorage makes version the storage version and waits until a probe
// object is written in it.
func (p *population) switchStorage(ctx context.Context, version string) {
	Expect(envtestutil.SetStorageVersion(ctx, env.Client, p.crd.Name, version)).To(Succeed())
	gvr := envtestutil.WidgetResource(p.group, version)
	probe := envtestutil.Widget(gvr, "kube-system", "probe", map[string]any{"color": "probe"})
	_, err := env.Dynamic.Resource(gvr).Namespace("kube-system").Create(ctx, probe, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	key := fmt.Sprintf("%s/%s/widgets/kube-system/probe", env.Etcd.Prefix, p.group)
	Eventually(func() string {
		_, err := env.Dynamic.Resource(gvr).Namespace("kube-system").Patch(ctx, "probe", "application/merge-patch+json",
			[]byte(`{"metadata":{"annotations":{"probe":"`+time.Now().String()+`"}}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		resp, err := env.Etcd.Client().Get(ctx, key)
		Expect(err).NotTo(HaveOccurred())
		if len(resp.Kvs) == 0 {
			return ""
		}
		var obj struct {
			APIVersion string `json:"apiVersion"`
		}
		Expect(json.Unmarshal(resp.Kvs[0].Value, &obj)).To(Succeed())
		return obj.APIVersion
	}).WithTimeout(30 * time.Second).Should(Equal(gvr.GroupVersion().String()))
	Expect(env.Dynamic.Resource(gvr).Namespace("kube-system").Delete(ctx, "probe", metav1.DeleteOptions{})).To(Succeed())
}

// intact checks that every object is still there with its content, read
// through the API server page by page.
func (p *population) intact(ctx context.Context) {
	seen := 0
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := env.Dynamic.Resource(p.v1).List(ctx, opts)
		Expect(err).NotTo(HaveOccurred())
		for _, obj := range list.Items {
			i, _, _ := unstructured.NestedInt64(obj.Object, "spec", "size")
			notes, _, _ := unstructured.NestedString(obj.Object, "spec", "notes")
			Expect(notes).To(Equal(p.notes(int(i))), "the content of %s/%s", obj.GetNamespace(), obj.GetName())
			seen++
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			break
		}
	}
	Expect(seen).To(Equal(p.n))
}

// storedAs counts the objects etcd holds in each apiVersion.
func (p *population) storedAs(ctx context.Context) map[string]int {
	counts := map[string]int{}
	prefix := fmt.Sprintf("%s/%s/widgets/", env.Etcd.Prefix, p.group)
	// Page through etcd: the population is up to 100 MiB.
	key := prefix
	end := clientv3.GetPrefixRangeEnd(prefix)
	for {
		resp, err := env.Etcd.Client().Get(ctx, key, clientv3.WithRange(end), clientv3.WithLimit(500))
		Expect(err).NotTo(HaveOccurred())
		for _, kv := range resp.Kvs {
			var obj struct {
				APIVersion string `json:"apiVersion"`
			}
			Expect(json.Unmarshal(kv.Value, &obj)).To(Succeed())
			counts[obj.APIVersion]++
		}
		if !resp.More {
			return counts
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
