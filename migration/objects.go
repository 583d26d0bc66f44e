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

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/graduator/graduator/internal/limit"
)

// objectRef is all the run keeps of a listed object.
type objectRef struct {
	Namespace, Name string
	ObjectVersion
	// WriteAt is the version the no-op write goes to when it is not
	// Options.Resource's (writeVersion); empty for Resource's.
	WriteAt string
}

// objectClient lists, reads and writes objects of one resource, keeping
// only what the run needs.
type objectClient interface {
	list(ctx context.Context, opts metav1.ListOptions) (page, error)
	// get returns nil, nil when the object does not exist.
	get(ctx context.Context, namespace, name string) (*ObjectVersion, error)
	// patch writes at version, Options.Resource's when empty.
	patch(ctx context.Context, namespace, name, version string, data []byte, subresources []string) (ObjectVersion, error)
	// size returns the size of the whole object as JSON, as etcd stores a
	// custom resource.
	size(ctx context.Context, namespace, name string) (int64, error)
	// compacted reports whether etcd compacted past resourceVersion: a
	// LIST at exactly that resourceVersion then answers 410 Gone.
	compacted(ctx context.Context, resourceVersion string) (bool, error)
	// watch watches the resource's objects (metadata is all the run reads
	// of the events).
	watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	// revision returns the current resourceVersion, without reading the
	// objects.
	revision(ctx context.Context) (string, error)
}

// noSuchNamespace is a namespace that cannot exist (it is no DNS label):
// a LIST in it answers the current resourceVersion at the cost of an empty
// range, where a LIST of the resource would count all its keys. The
// in-tree StorageVersionMigration controller reads its checkpoint the same
// way.
const noSuchNamespace = "@graduator:no-such-namespace"

// currentRevision lists the resource in noSuchNamespace, or, for a
// cluster-scoped resource (which answers that with 404), one object of it.
func currentRevision(inNamespace, cluster func() (string, error)) (string, error) {
	rv, err := inNamespace()
	if apierrors.IsNotFound(err) {
		return cluster()
	}
	return rv, err
}

// newObjectClient picks the client: one of the engine's own, built from
// opts.Config with a transport that reports throttling to the limiter, or
// the dynamic client.
func newObjectClient(dyn dynamic.Interface, opts Options, writers *limit.Gate) (objectClient, error) {
	if opts.Config != nil {
		cfg := rest.CopyConfig(opts.Config)
		// No client-side token bucket (client-go's default is 5 QPS): API
		// Priority and Fairness and the adaptive limit govern the rate, and
		// Options.QPS caps it when set.
		cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return throttleObserver{next: rt, writers: writers} })
		md, err := metadata.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("create the metadata client: %w", err)
		}
		full, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("create the dynamic client: %w", err)
		}
		m := metadataObjects{resource: md.Resource(opts.Resource), full: full.Resource(opts.Resource),
			writeAt: opts.writeAt, at: map[string]metadata.Getter{}}
		if len(opts.WriteVersions) > 0 {
			// An old version may be deprecated: one warning per write
			// would flood the log.
			quiet := rest.CopyConfig(cfg)
			quiet.WarningHandler = rest.NoWarnings{}
			old, err := metadata.NewForConfig(quiet)
			if err != nil {
				return nil, fmt.Errorf("create the metadata client: %w", err)
			}
			for _, v := range opts.WriteVersions {
				gvr := opts.Resource
				gvr.Version = v
				m.at[v] = old.Resource(gvr)
			}
		}
		return m, nil
	}
	return dynamicObjects{client: dyn, resource: opts.Resource, writeAt: opts.writeAt}, nil
}

// metricsReader reads the API server's /metrics with cfg, nil without one.
func metricsReader(cfg *rest.Config) func(context.Context) ([]byte, error) {
	if cfg == nil {
		return nil
	}
	return func(ctx context.Context) ([]byte, error) {
		c, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			return nil, err
		}
		return c.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	}
}

// throttleObserver sees every response to the engine's writes. A 429 or
// 5xx with a Retry-After holds every writer back for that long at once,
// and the header is consumed: client-go's REST client would otherwise wait
// and resend the write by itself, up to ten times, behind the limiter's
// back, and every write in flight would keep knocking. The write then fails
// as throttled and is retried under the limit.
type throttleObserver struct {
	next    http.RoundTripper
	writers *limit.Gate
}

func (t throttleObserver) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodPatch {
		return resp, err
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= http.StatusInternalServerError {
		if seconds, convErr := strconv.Atoi(resp.Header.Get("Retry-After")); convErr == nil && seconds > 0 {
			t.writers.Hold(time.Duration(seconds) * time.Second)
			resp.Header.Del("Retry-After")
		}
	}
	return resp, nil
}

// metadataObjects asks the API server for PartialObjectMetadata: object
// bodies never travel, whatever their size.
type metadataObjects struct {
	resource metadata.Getter
	// full reads a whole object now and then, to size the writes for the
	// etcd space budget.
	full dynamic.NamespaceableResourceInterface
	// writeAt picks each listed object's write version; at holds the
	// resource at each of Options.WriteVersions.
	writeAt func([]metav1.ManagedFieldsEntry) string
	at      map[string]metadata.Getter
}

func (m metadataObjects) list(ctx context.Context, opts metav1.ListOptions) (page, error) {
	list, err := m.resource.List(ctx, opts)
	if err != nil {
		return page{}, err
	}
	p := newPage(list.ListMeta, len(list.Items))
	for i := range list.Items {
		ref := refOf(&list.Items[i].ObjectMeta)
		ref.WriteAt = m.writeAt(list.Items[i].ManagedFields)
		p.items = append(p.items, ref)
	}
	return p, nil
}

func (m metadataObjects) get(ctx context.Context, namespace, name string) (*ObjectVersion, error) {
	obj, err := m.resource.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	return versionOf(obj, err)
}

func (m metadataObjects) patch(ctx context.Context, namespace, name, version string, data []byte, subresources []string) (ObjectVersion, error) {
	resource := m.resource
	if at, ok := m.at[version]; ok {
		resource = at
	}
	obj, err := resource.Namespace(namespace).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}, subresources...)
	if err != nil {
		return ObjectVersion{}, err
	}
	return ObjectVersion{UID: string(obj.UID), ResourceVersion: obj.ResourceVersion}, nil
}

func (m metadataObjects) size(ctx context.Context, namespace, name string) (int64, error) {
	return sizeOf(m.full.Namespace(namespace).Get(ctx, name, metav1.GetOptions{}))
}

func (m metadataObjects) compacted(ctx context.Context, resourceVersion string) (bool, error) {
	_, err := m.resource.List(ctx, exactly(resourceVersion))
	return compactedBy(err)
}

func (m metadataObjects) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return m.resource.Watch(ctx, opts)
}

func (m metadataObjects) revision(ctx context.Context) (string, error) {
	list := func(r metadata.ResourceInterface) func() (string, error) {
		return func() (string, error) {
			l, err := r.List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				return "", err
			}
			return l.ResourceVersion, nil
		}
	}
	return currentRevision(list(m.resource.Namespace(noSuchNamespace)), list(m.resource))
}

// dynamicObjects reads whole objects and keeps their metadata.
type dynamicObjects struct {
	client   dynamic.Interface
	resource schema.GroupVersionResource
	writeAt  func([]metav1.ManagedFieldsEntry) string
}

func (d dynamicObjects) list(ctx context.Context, opts metav1.ListOptions) (page, error) {
	list, err := d.client.Resource(d.resource).List(ctx, opts)
	if err != nil {
		return page{}, err
	}
	p := page{resourceVersion: list.GetResourceVersion(), continueToken: list.GetContinue(), remaining: remaining(list.GetRemainingItemCount(), list.GetContinue())}
	p.items = make([]objectRef, 0, len(list.Items))
	for i := range list.Items {
		obj := &list.Items[i]
		p.items = append(p.items, objectRef{Namespace: obj.GetNamespace(), Name: obj.GetName(),
			ObjectVersion: ObjectVersion{UID: string(obj.GetUID()), ResourceVersion: obj.GetResourceVersion()},
			WriteAt:       d.writeAt(obj.GetManagedFields())})
	}
	return p, nil
}

func (d dynamicObjects) get(ctx context.Context, namespace, name string) (*ObjectVersion, error) {
	obj, err := d.client.Resource(d.resource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &ObjectVersion{UID: string(obj.GetUID()), ResourceVersion: obj.GetResourceVersion()}, nil
}

func (d dynamicObjects) patch(ctx context.Context, namespace, name, version string, data []byte, subresources []string) (ObjectVersion, error) {
	gvr := d.resource
	if version != "" {
		gvr.Version = version
	}
	obj, err := d.client.Resource(gvr).Namespace(namespace).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}, subresources...)
	if err != nil {
		return ObjectVersion{}, err
	}
	return ObjectVersion{UID: string(obj.GetUID()), ResourceVersion: obj.GetResourceVersion()}, nil
}

func (d dynamicObjects) size(ctx context.Context, namespace, name string) (int64, error) {
	return sizeOf(d.client.Resource(d.resource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{}))
}

func (d dynamicObjects) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return d.client.Resource(d.resource).Watch(ctx, opts)
}

func (d dynamicObjects) revision(ctx context.Context) (string, error) {
	list := func(r dynamic.ResourceInterface) func() (string, error) {
		return func() (string, error) {
			l, err := r.List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				return "", err
			}
			return l.GetResourceVersion(), nil
		}
	}
	resource := d.client.Resource(d.resource)
	return currentRevision(list(resource.Namespace(noSuchNamespace)), list(resource))
}

func (d dynamicObjects) compacted(ctx context.Context, resourceVersion string) (bool, error) {
	_, err := d.client.Resource(d.resource).List(ctx, exactly(resourceVersion))
	return compactedBy(err)
}

// exactly is a LIST of one object at exactly resourceVersion: the API server
// answers it from its watch cache or etcd while the revision is kept, and
// with 410 Gone once etcd compacted past it (the watch cache drops its
// snapshots within 15 s of a compaction).
func exactly(resourceVersion string) metav1.ListOptions {
	return metav1.ListOptions{Limit: 1, ResourceVersion: resourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact}
}

func compactedBy(err error) (bool, error) {
	switch {
	case err == nil:
		return false, nil
	case apierrors.IsResourceExpired(err), apierrors.IsGone(err):
		return true, nil
	}
	return false, err
}

func sizeOf(obj *unstructured.Unstructured, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	data, err := obj.MarshalJSON()
	return int64(len(data)), err
}

func newPage(meta metav1.ListMeta, n int) page {
	return page{resourceVersion: meta.ResourceVersion, continueToken: meta.Continue,
		remaining: remaining(meta.RemainingItemCount, meta.Continue), items: make([]objectRef, 0, n)}
}

// remaining is the number of objects a LIST has not returned yet: the API
// server's remainingItemCount, none after the last page (which carries no
// count), and -1 when unknown (a server that does not count, or a label
// selector).
func remaining(count *int64, continueToken string) int64 {
	switch {
	case count != nil:
		return *count
	case continueToken == "":
		return 0
	}
	return -1
}

func refOf(m *metav1.ObjectMeta) objectRef {
	return objectRef{Namespace: m.Namespace, Name: m.Name, ObjectVersion: ObjectVersion{UID: string(m.UID), ResourceVersion: m.ResourceVersion}}
}

func versionOf(obj *metav1.PartialObjectMetadata, err error) (*ObjectVersion, error) {
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &ObjectVersion{UID: string(obj.UID), ResourceVersion: obj.ResourceVersion}, nil
}
