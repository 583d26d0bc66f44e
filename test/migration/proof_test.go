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

package migration_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graduator/graduator/internal/roundtrip"
)

// The proof lives in package roundtrip; its listing is here because this
// suite's API server has no watch cache, so compacting etcd really expires
// a continue token.
var _ = Describe("The round-trip proof's listing", func() {
	It("goes on from the next key when a compaction expires its continue token, and lists every object once", func(ctx SpecContext) {
		// A proof of 1,000,000 objects lists for longer than the API
		// server's compaction interval (5 minutes): its continue token
		// expired mid-listing, and the proof failed, again at every retry
		// (the operator never graduated the CRD).
		const n = 200
		f := newFixture(ctx, n)
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(f.crd), crd)).To(Succeed())
		for _, sample := range []bool{false, true} {
			By(fmt.Sprintf("proving with Sample=%t", sample))
			compacting := &compactAfterFirstPage{Interface: dyn}
			r, err := roundtrip.Prove(ctx, compacting, crd, roundtrip.Options{Target: "v2", PageSize: 30, Sample: sample})
			Expect(err).NotTo(HaveOccurred())
			Expect(compacting.compacted).To(BeTrue(), "etcd was compacted during the listing")
			Expect(r.Versions).To(HaveLen(1))
			Expect(r.Versions[0].Listed).To(Equal(n), "every object listed once")
			Expect(r.Lossless()).To(BeTrue(), r.Message())
		}
	})
})

// compactAfterFirstPage is a dynamic client that compacts etcd past a paged
// listing's snapshot once its first page is served, so the next page's
// continue token has expired (410 Gone).
type compactAfterFirstPage struct {
	dynamic.Interface
	once      sync.Once
	compacted bool
}

func (c *compactAfterFirstPage) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return compactingResource{NamespaceableResourceInterface: c.Interface.Resource(gvr), c: c}
}

type compactingResource struct {
	dynamic.NamespaceableResourceInterface
	c *compactAfterFirstPage
}

func (r compactingResource) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	list, err := r.NamespaceableResourceInterface.List(ctx, opts)
	if err == nil && list.GetContinue() != "" {
		r.c.once.Do(func() {
			// A write after the listing's snapshot, then a compaction at it.
			put, err := etcd.Client().Put(ctx, "compact-probe", time.Now().String())
			Expect(err).NotTo(HaveOccurred())
			_, err = etcd.Client().Compact(ctx, put.Header.Revision)
			Expect(err).NotTo(HaveOccurred())
			r.c.compacted = true
		})
	}
	return list, err
}
