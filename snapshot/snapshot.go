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

// Package snapshot proves that a storage migration changed no object's
// content. A snapshot is every object of a resource read at one API
// version, streamed to a gzip file a page at a time (one JSON record an
// object, in LIST order); Compare reads the file and the cluster side by
// side and reports each object that differs. Neither ever holds more than
// a few pages of objects, whatever the size of the resource.
//
// What is compared is the object as the API server returns it, minus the
// fields a migration legitimately changes: metadata.resourceVersion (every
// write moves it) and metadata.managedFields (Graduator drops the entries of
// versions that are no longer served). Everything else, generation and uid
// included, must survive: see docs/design.md, "Snapshots and verify".
package snapshot

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/graduator/graduator/internal/paging"
)

// Kind is the kind of a snapshot file's header.
const Kind = "GraduatorSnapshot"

// PageSize is the LIST limit of snapshots and comparisons.
const PageSize = paging.DefaultPageSize

// Header is the first record of a snapshot file.
type Header struct {
	Kind string `json:"kind"`
	// Group, Version and Resource say what was read, and at which version:
	// a comparison reads the cluster at the same one.
	Group    string    `json:"group"`
	Version  string    `json:"version"`
	Resource string    `json:"resource"`
	TakenAt  time.Time `json:"takenAt"`
}

// GroupVersionResource is what the snapshot was read from.
func (h Header) GroupVersionResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: h.Group, Version: h.Version, Resource: h.Resource}
}

// Record is one object of a snapshot.
type Record struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Object is the object's JSON without the fields a migration may change
	// (see Comparable), with sorted keys: equal objects have equal bytes.
	Object json.RawMessage `json:"object"`
}

// Key is "namespace/name", or "name" for a cluster-scoped object. Its byte
// order is the order of etcd's keys, which is the order a LIST returns.
func (r Record) Key() string { return key(r.Namespace, r.Name) }

func key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// Comparable drops the fields a no-op rewrite may change: the
// resourceVersion, which every write moves, and managedFields, whose
// entries of unserved versions Graduator removes. It does not modify obj.
func Comparable(obj *unstructured.Unstructured) map[string]any {
	content := make(map[string]any, len(obj.Object))
	for k, v := range obj.Object {
		content[k] = v
	}
	if meta, ok := obj.Object["metadata"].(map[string]any); ok {
		m := make(map[string]any, len(meta))
		for k, v := range meta {
			if k != "resourceVersion" && k != "managedFields" {
				m[k] = v
			}
		}
		content["metadata"] = m
	}
	return content
}

// recordOf turns a listed object into a Record.
func recordOf(obj *unstructured.Unstructured) (Record, error) {
	data, err := json.Marshal(Comparable(obj)) // maps marshal with sorted keys
	if err != nil {
		return Record{}, fmt.Errorf("encode %s: %w", key(obj.GetNamespace(), obj.GetName()), err)
	}
	return Record{Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: string(obj.GetUID()), Object: data}, nil
}

// ErrOutOfOrder says that objects did not come in key order, which the
// streaming comparison relies on. The API server lists in key order; a
// snapshot file edited by hand may not be.
var ErrOutOfOrder = errors.New("objects are not in key order")

// eachRecord lists every object of resource in key order and calls fn with
// its Record. When the listing restarts (an expired continue token), the
// objects up to the last one handled are passed over, so fn sees each
// object once, read by the first listing or by the restarted one.
func eachRecord(ctx context.Context, c dynamic.Interface, resource schema.GroupVersionResource, fn func(Record) error) error {
	last, restarted := "", false
	return paging.EachObject(ctx, c, resource, PageSize, func() { restarted = true }, func(obj *unstructured.Unstructured) error {
		k := key(obj.GetNamespace(), obj.GetName())
		if last != "" && k <= last {
			if restarted {
				return nil // handled before the restart
			}
			return fmt.Errorf("list %s: %w: %s after %s", resource, ErrOutOfOrder, k, last)
		}
		last = k
		rec, err := recordOf(obj)
		if err != nil {
			return err
		}
		return fn(rec)
	})
}

// Write reads every object of resource, at resource.Version, and writes the
// snapshot to w, compressed, a page at a time. It returns the number of
// objects written.
func Write(ctx context.Context, c dynamic.Interface, resource schema.GroupVersionResource, w io.Writer) (int, error) {
	zw := gzip.NewWriter(w)
	buf := bufio.NewWriterSize(zw, 64<<10)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	header := Header{Kind: Kind, Group: resource.Group, Version: resource.Version, Resource: resource.Resource, TakenAt: time.Now().UTC()}
	if err := enc.Encode(header); err != nil {
		return 0, err
	}
	n := 0
	err := eachRecord(ctx, c, resource, func(r Record) error {
		n++
		return enc.Encode(r)
	})
	if err != nil {
		return n, err
	}
	if err := buf.Flush(); err != nil {
		return n, fmt.Errorf("write the snapshot: %w", err)
	}
	if err := zw.Close(); err != nil {
		return n, fmt.Errorf("write the snapshot: %w", err)
	}
	return n, nil
}

// Reader reads a snapshot written by Write, one record at a time.
type Reader struct {
	Header Header
	dec    *json.Decoder
	last   string
}

// NewReader reads the header of the snapshot in r.
func NewReader(r io.Reader) (*Reader, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("not a snapshot (gzip): %w", err)
	}
	dec := json.NewDecoder(bufio.NewReaderSize(zr, 64<<10))
	var h Header
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("not a snapshot: read its header: %w", err)
	}
	switch {
	case h.Kind != Kind:
		return nil, fmt.Errorf("not a snapshot: its first record is of kind %q, a snapshot's is %q (written by graduator verify --snapshot)", h.Kind, Kind)
	case h.Version == "" || h.Resource == "":
		return nil, fmt.Errorf("not a snapshot: its %s header names no resource or version (resource %q, version %q)", Kind, h.Resource, h.Version)
	}
	return &Reader{Header: h, dec: dec}, nil
}

// Next returns the next record, or io.EOF after the last one. A file cut
// short fails here (gzip's checksum), it does not end early.
func (r *Reader) Next() (Record, error) {
	var rec Record
	if err := r.dec.Decode(&rec); err != nil {
		if errors.Is(err, io.EOF) {
			return rec, io.EOF
		}
		return rec, fmt.Errorf("read the snapshot after %q: %w", r.last, err)
	}
	if k := rec.Key(); r.last != "" && k <= r.last {
		return rec, fmt.Errorf("read the snapshot: %w: %s after %s", ErrOutOfOrder, k, r.last)
	}
	r.last = rec.Key()
	return rec, nil
}

// What tells how an object differs.
type What string

const (
	// Changed: the object is in both, with different content.
	Changed What = "changed"
	// Missing: the object is in the snapshot only (deleted since).
	Missing What = "missing"
	// Added: the object is in the cluster only (created since).
	Added What = "added"
)

// Difference is an object whose content differs between a snapshot and the
// cluster.
type Difference struct {
	// Object is "namespace/name", or "name" for a cluster-scoped object.
	Object string `json:"object"`
	What   What   `json:"what"`
	// Changes are the differing fields of a Changed object.
	Changes []Change `json:"changes,omitempty"`
}

func (d Difference) String() string { return d.Object + ": " + string(d.What) }

// Summary counts what a comparison saw.
type Summary struct {
	// Snapshot and Cluster count the objects of each side.
	Snapshot int `json:"snapshot"`
	Cluster  int `json:"cluster"`
	// Identical objects are in both with the same content.
	Identical int `json:"identical"`
	Changed   int `json:"changed"`
	Missing   int `json:"missing"`
	Added     int `json:"added"`
}

// Differences is the number of objects that differ.
func (s Summary) Differences() int { return s.Changed + s.Missing + s.Added }

// Compare reads the cluster's objects of the snapshot's resource, at the
// snapshot's version, and the snapshot side by side (both are in key order,
// so this is a merge, not a map of every object), and calls report for each
// object that differs, in key order.
func Compare(ctx context.Context, c dynamic.Interface, snap *Reader, report func(Difference) error) (Summary, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return mergeByKey(snapshotStream(snap), liveStream(ctx, c, snap.Header.GroupVersionResource()), report)
}

// stream yields records in key order, then nil.
type stream func() (*Record, error)

// snapshotStream yields a snapshot's records.
func snapshotStream(snap *Reader) stream {
	return func() (*Record, error) {
		rec, err := snap.Next()
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return &rec, nil
	}
}

// liveStream yields the cluster's objects of resource, from a lister
// goroutine a page ahead; it stops when ctx ends.
func liveStream(ctx context.Context, c dynamic.Interface, resource schema.GroupVersionResource) stream {
	type item struct {
		rec Record
		err error
	}
	live := make(chan item, PageSize)
	go func() {
		defer close(live)
		err := eachRecord(ctx, c, resource, func(r Record) error {
			select {
			case live <- item{rec: r}:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if err != nil {
			select {
			case live <- item{err: err}:
			case <-ctx.Done():
			}
		}
	}()
	return func() (*Record, error) {
		it, ok := <-live
		switch {
		case !ok:
			return nil, ctx.Err()
		case it.err != nil:
			return nil, it.err
		}
		return &it.rec, nil
	}
}

// mergeByKey walks the snapshot and the cluster side by side in key order,
// reporting each difference as it is found.
func mergeByKey(nextSnap, nextLive stream, report func(Difference) error) (Summary, error) {
	var s Summary
	before, err := nextSnap()
	if err != nil {
		return s, err
	}
	after, err := nextLive()
	if err != nil {
		return s, err
	}
	for before != nil || after != nil {
		d, moveSnap, moveLive, err := s.compareOne(before, after)
		if err != nil {
			return s, err
		}
		if d != nil {
			if err := report(*d); err != nil {
				return s, err
			}
		}
		if moveSnap {
			if before, err = nextSnap(); err != nil {
				return s, err
			}
		}
		if moveLive {
			if after, err = nextLive(); err != nil {
				return s, err
			}
		}
	}
	return s, nil
}

// compareOne counts one step of the walk: an object only the snapshot has
// (Missing), only the cluster has (Added), or both (identical or Changed).
// It returns the difference (nil when identical) and which sides move on.
func (s *Summary) compareOne(before, after *Record) (d *Difference, moveSnap, moveLive bool, err error) {
	switch {
	case after == nil || (before != nil && before.Key() < after.Key()):
		s.Snapshot++
		s.Missing++
		return &Difference{Object: before.Key(), What: Missing}, true, false, nil
	case before == nil || after.Key() < before.Key():
		s.Cluster++
		s.Added++
		return &Difference{Object: after.Key(), What: Added}, false, true, nil
	}
	s.Snapshot++
	s.Cluster++
	if bytes.Equal(before.Object, after.Object) {
		s.Identical++
		return nil, true, true, nil
	}
	s.Changed++
	changes, err := Diff(before.Object, after.Object)
	if err != nil {
		return nil, false, false, fmt.Errorf("compare %s: %w", before.Key(), err)
	}
	return &Difference{Object: before.Key(), What: Changed, Changes: changes}, true, true, nil
}

// Snapshot is a snapshot held in memory, compressed: for tests and small
// resources. Take and Verify are Write and Compare around a buffer.
type Snapshot struct {
	data []byte
	n    int
}

// Take reads every object of the resource (at resource.Version).
func Take(ctx context.Context, c dynamic.Interface, resource schema.GroupVersionResource) (*Snapshot, error) {
	var buf bytes.Buffer
	n, err := Write(ctx, c, resource, &buf)
	if err != nil {
		return nil, err
	}
	return &Snapshot{data: buf.Bytes(), n: n}, nil
}

// Len is the number of objects in the snapshot.
func (s *Snapshot) Len() int { return s.n }

// Verify reads every object again and returns those that differ.
func (s *Snapshot) Verify(ctx context.Context, c dynamic.Interface) ([]Difference, error) {
	r, err := NewReader(bytes.NewReader(s.data))
	if err != nil {
		return nil, err
	}
	var diffs []Difference
	_, err = Compare(ctx, c, r, func(d Difference) error {
		diffs = append(diffs, d)
		return nil
	})
	return diffs, err
}
