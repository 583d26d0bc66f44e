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

package migration

// The client-side logic of CleanupManagedFields and of the snapshot listing,
// against the dynamic fake client: what happens after a conflict, and how an
// expired continue token restarts the listing. What the API server owns
// (managedFields semantics, real 410s after compaction) is proven by the
// envtest suite in test/migration.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
)

var (
	fakeWidgets = schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}
	fakeGR      = fakeWidgets.GroupResource()
)

// fakeWidget is a widget whose managedFields hold an entry of the unserved
// v1 and one of v2.
func fakeWidget(name string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v2", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": "default", "resourceVersion": "1"},
	}}
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "old", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "example.com/v1"},
		{Manager: "new", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "example.com/v2"},
	})
	return obj
}

func newFakeClient(names ...string) *fake.FakeDynamicClient {
	objs := make([]runtime.Object, 0, len(names))
	for _, n := range names {
		objs = append(objs, fakeWidget(n))
	}
	return fake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{fakeWidgets: "WidgetList"}, objs...)
}

// pagedClient is the fake client, but LISTs of widgets return pageSize
// objects at a time, read from the tracker when the page is asked for, with
// the index of the next object as the continue token. (The fake's reactors
// cannot page: a cluster-wide LIST action drops the continue token.) expire
// says whether a LIST with this token gets 410 Gone; with carry, the 410
// carries a continue token that goes on from the same index, as the API
// server's inconsistent continue goes on from the next key.
type pagedClient struct {
	*fake.FakeDynamicClient
	pageSize int
	expire   func(token string) bool
	carry    bool

	mu     sync.Mutex
	tokens []string
}

func paged(c *fake.FakeDynamicClient, pageSize int, expire func(token string) bool) *pagedClient {
	return &pagedClient{FakeDynamicClient: c, pageSize: pageSize, expire: expire}
}

func (p *pagedClient) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return pagedResource{NamespaceableResourceInterface: p.FakeDynamicClient.Resource(gvr), p: p}
}

// continueTokens returns the continue tokens of the LISTs, in order.
func (p *pagedClient) continueTokens() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.tokens...)
}

type pagedResource struct {
	dynamic.NamespaceableResourceInterface
	p *pagedClient
}

func (r pagedResource) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	if opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact {
		// The space budget asking whether etcd compacted: not the listing.
		return r.NamespaceableResourceInterface.List(ctx, opts)
	}
	r.p.mu.Lock()
	r.p.tokens = append(r.p.tokens, opts.Continue)
	r.p.mu.Unlock()
	if r.p.expire(opts.Continue) {
		expired := apierrors.NewResourceExpired("the provided continue parameter is too old")
		if r.p.carry {
			expired.ErrStatus.Continue = opts.Continue
		}
		return nil, expired
	}
	start := 0
	if opts.Continue != "" {
		if _, err := fmt.Sscan(opts.Continue, &start); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	}
	stored, err := r.p.Tracker().List(fakeWidgets, fakeWidgets.GroupVersion().WithKind("Widget"), "")
	if err != nil {
		return nil, err
	}
	all := stored.(*unstructured.UnstructuredList).Items
	sort.Slice(all, func(i, j int) bool { return all[i].GetName() < all[j].GetName() })
	page := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "example.com/v2", "kind": "WidgetList"}}
	end := min(start+r.p.pageSize, len(all))
	page.Items = all[start:end]
	if end < len(all) {
		page.SetContinue(fmt.Sprint(end))
	}
	return page, nil
}

// countCalls counts the actions of a verb on widgets.
func countCalls(c *fake.FakeDynamicClient, verb string) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == verb && a.GetResource() == fakeWidgets {
			n++
		}
	}
	return n
}

func managedAPIVersions(c *fake.FakeDynamicClient, name string) []string {
	obj, err := c.Resource(fakeWidgets).Namespace("default").Get(context.Background(), name, metav1.GetOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var out []string
	for _, e := range obj.GetManagedFields() {
		out = append(out, e.APIVersion)
	}
	return out
}

var _ = Describe("CleanupManagedFields", func() {
	served := []string{"v2"}

	It("drops the entries of unserved versions and counts the objects it changed", func(ctx SpecContext) {
		c := newFakeClient("w-0", "w-1")
		cleaned, err := CleanupManagedFields(ctx, c, fakeWidgets, served)
		Expect(err).NotTo(HaveOccurred())
		Expect(cleaned).To(Equal(2))
		Expect(managedAPIVersions(c, "w-0")).To(Equal([]string{"example.com/v2"}))

		By("changing nothing the second time")
		cleaned, err = CleanupManagedFields(ctx, c, fakeWidgets, served)
		Expect(err).NotTo(HaveOccurred())
		Expect(cleaned).To(BeZero())
	})

	It("reads the object again after a conflict and cleans it", func(ctx SpecContext) {
		c := newFakeClient("w-0")
		conflicts := 0
		c.PrependReactor("patch", "widgets", func(clienttesting.Action) (bool, runtime.Object, error) {
			if conflicts++; conflicts == 1 {
				return true, nil, apierrors.NewConflict(fakeGR, "w-0", errors.New("the object has been modified"))
			}
			return false, nil, nil
		})
		cleaned, err := CleanupManagedFields(ctx, c, fakeWidgets, served)
		Expect(err).NotTo(HaveOccurred())
		Expect(cleaned).To(Equal(1))
		Expect(countCalls(c, "get")).To(Equal(1), "one GET after the conflict")
		Expect(managedAPIVersions(c, "w-0")).To(Equal([]string{"example.com/v2"}))
	})

	It("returns a wrapped error, and does not panic, when the GET after a conflict fails", func(ctx SpecContext) {
		c := newFakeClient("w-0")
		c.PrependReactor("patch", "widgets", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewConflict(fakeGR, "w-0", errors.New("the object has been modified"))
		})
		c.PrependReactor("get", "widgets", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewInternalError(errors.New("etcd is unhappy"))
		})
		var cleaned int
		var err error
		Expect(func() { cleaned, err = CleanupManagedFields(ctx, c, fakeWidgets, served) }).NotTo(Panic())
		Expect(err).To(HaveOccurred())
		Expect(apierrors.IsInternalError(err)).To(BeTrue(), "the GET's error is wrapped: %v", err)
		Expect(err.Error()).To(ContainSubstring("get widgets default/w-0"))
		Expect(cleaned).To(BeZero())
	})

	It("counts nothing for an object deleted between the conflict and the GET", func(ctx SpecContext) {
		c := newFakeClient("w-0")
		c.PrependReactor("patch", "widgets", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewConflict(fakeGR, "w-0", errors.New("the object has been modified"))
		})
		c.PrependReactor("get", "widgets", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewNotFound(fakeGR, "w-0")
		})
		cleaned, err := CleanupManagedFields(ctx, c, fakeWidgets, served)
		Expect(err).NotTo(HaveOccurred())
		Expect(cleaned).To(BeZero())
	})

	It("gives up with the conflict, wrapped, when every attempt conflicts", func(ctx SpecContext) {
		c := newFakeClient("w-0")
		c.PrependReactor("patch", "widgets", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewConflict(fakeGR, "w-0", errors.New("the object has been modified"))
		})
		_, err := CleanupManagedFields(ctx, c, fakeWidgets, served)
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("clean managedFields of widgets default/w-0"))
		Expect(countCalls(c, "patch")).To(Equal(5), "retry.DefaultRetry makes 5 attempts")
	})

	It("restarts the listing from the beginning when the continue token expires", func(ctx SpecContext) {
		c := newFakeClient("w-0", "w-1", "w-2", "w-3", "w-4")
		expired := false
		pc := paged(c, 2, func(token string) bool {
			if token == "4" && !expired {
				expired = true
				return true
			}
			return false
		})
		cleaned, err := CleanupManagedFields(ctx, pc, fakeWidgets, served)
		Expect(err).NotTo(HaveOccurred())
		Expect(pc.continueTokens()).To(Equal([]string{"", "2", "4", "", "2", "4"}), "the second listing starts without a token")
		Expect(cleaned).To(Equal(5), "objects cleaned before the restart are not counted twice")
		for _, n := range []string{"w-0", "w-1", "w-2", "w-3", "w-4"} {
			Expect(managedAPIVersions(c, n)).To(Equal([]string{"example.com/v2"}), n)
		}
	})

	It("goes on from the continue token an expired listing's 410 carries", func(ctx SpecContext) {
		c := newFakeClient("w-0", "w-1", "w-2", "w-3", "w-4")
		expired := false
		pc := paged(c, 2, func(token string) bool {
			if token == "4" && !expired {
				expired = true
				return true
			}
			return false
		})
		pc.carry = true
		cleaned, err := CleanupManagedFields(ctx, pc, fakeWidgets, served)
		Expect(err).NotTo(HaveOccurred())
		Expect(pc.continueTokens()).To(Equal([]string{"", "2", "4", "4"}), "no object listed twice")
		Expect(cleaned).To(Equal(5))
		for _, n := range []string{"w-0", "w-1", "w-2", "w-3", "w-4"} {
			Expect(managedAPIVersions(c, n)).To(Equal([]string{"example.com/v2"}), n)
		}
	})

	It("stops restarting after maxListRestarts and returns the expiry", func(ctx SpecContext) {
		c := newFakeClient("w-0", "w-1", "w-2")
		pc := paged(c, 2, func(token string) bool { return token != "" })
		_, err := CleanupManagedFields(ctx, pc, fakeWidgets, served)
		Expect(apierrors.IsResourceExpired(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("list " + fakeWidgets.String()))
		Expect(pc.continueTokens()).To(HaveLen(2*(maxListRestarts+1)), "a first page and an expired second page per attempt")
	})

	It("does not restart when the first page fails", func(ctx SpecContext) {
		c := newFakeClient("w-0")
		c.PrependReactor("list", "widgets", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewResourceExpired("too old resource version")
		})
		_, err := CleanupManagedFields(ctx, c, fakeWidgets, served)
		Expect(apierrors.IsResourceExpired(err)).To(BeTrue())
		Expect(countCalls(c, "list")).To(Equal(1))
	})
})
