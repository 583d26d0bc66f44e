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

package graduationtest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/snapshot"
)

// Snapshot is every object of a CRD read at every version served when it
// was taken, minus the fields a rewrite legitimately changes
// (metadata.resourceVersion and metadata.managedFields; see package
// snapshot). Reading at every version matters: a conversion that drops a
// field shows at the version that lost it, not at the one it was created at.
type Snapshot struct {
	// CRD is the CRD's name.
	CRD string
	// Versions maps each served version to the objects read at it.
	Versions map[string]*snapshot.Snapshot
}

// Len is the number of objects in the snapshot (at any one version).
func (s *Snapshot) Len() int {
	for _, v := range s.Versions {
		return v.Len()
	}
	return 0
}

// Snapshot reads every object of the CRD named crdName at every served
// version. It fails the test when a read fails: a conversion webhook that
// cannot convert an object shows here.
func (r *Rehearsal) Snapshot(ctx context.Context, crdName string) *Snapshot {
	r.helper()
	s, err := r.TrySnapshot(ctx, crdName)
	r.fatal(err)
	return s
}

// TrySnapshot is Snapshot returning an error.
func (r *Rehearsal) TrySnapshot(ctx context.Context, crdName string) (*Snapshot, error) {
	crd, err := r.crd(ctx, crdName)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{CRD: crdName, Versions: map[string]*snapshot.Snapshot{}}
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		taken, err := snapshot.Take(ctx, r.Dynamic, graduation.ResourceAt(crd, v.Name))
		if err != nil {
			return nil, fmt.Errorf("snapshot %s at %s: %w", crdName, v.Name, err)
		}
		s.Versions[v.Name] = taken
	}
	return s, nil
}

// VersionDifference is an object that differs from the snapshot when read
// at Version.
type VersionDifference struct {
	Version string
	snapshot.Difference
}

// String names the object, the version and every differing field with its
// JSON path: `v1: default/w-1: changed: /spec/color: "red" -> (absent)`.
func (d VersionDifference) String() string {
	s := d.Version + ": " + d.Object + ": " + string(d.What)
	for _, c := range d.Changes {
		s += "\n      " + c.String()
	}
	return s
}

// Verify reads every object again at each version of the snapshot that is
// still served and fails the test naming every object that differs, every
// field with its JSON path, at every version. Versions no longer served are
// skipped (the API server cannot read at them).
func (r *Rehearsal) Verify(ctx context.Context, snap *Snapshot) {
	r.helper()
	diffs, err := r.Differences(ctx, snap)
	r.fatal(err)
	if len(diffs) == 0 {
		return
	}
	lines := make([]string, 0, len(diffs))
	for _, d := range diffs {
		lines = append(lines, "  "+d.String())
	}
	r.fatal(fmt.Errorf("%d differences between the snapshot of %s and its objects now:\n%s",
		len(diffs), snap.CRD, strings.Join(lines, "\n")))
}

// Differences is Verify returning what differs (in version, then object
// order) instead of failing.
func (r *Rehearsal) Differences(ctx context.Context, snap *Snapshot) ([]VersionDifference, error) {
	crd, err := r.crd(ctx, snap.CRD)
	if err != nil {
		return nil, err
	}
	var out []VersionDifference
	for _, version := range slices.Sorted(maps.Keys(snap.Versions)) {
		served := slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
			return v.Name == version && v.Served
		})
		if !served {
			continue
		}
		diffs, err := snap.Versions[version].Verify(ctx, r.Dynamic)
		if err != nil {
			return nil, fmt.Errorf("read %s at %s: %w", snap.CRD, version, err)
		}
		for _, d := range diffs {
			if d = r.withoutIgnored(d); d.What != snapshot.Changed || len(d.Changes) > 0 {
				out = append(out, VersionDifference{Version: version, Difference: d})
			}
		}
	}
	return out, nil
}

// withoutIgnored drops the changes under Options.Ignore.
func (r *Rehearsal) withoutIgnored(d snapshot.Difference) snapshot.Difference {
	if len(r.opts.Ignore) == 0 {
		return d
	}
	kept := d.Changes[:0:0]
	for _, c := range d.Changes {
		ignored := slices.ContainsFunc(r.opts.Ignore, func(p string) bool {
			return c.Path == p || strings.HasPrefix(c.Path, strings.TrimSuffix(p, "/")+"/")
		})
		if !ignored {
			kept = append(kept, c)
		}
	}
	d.Changes = kept
	return d
}

func (r *Rehearsal) crd(ctx context.Context, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		return nil, fmt.Errorf("get CRD %s: %w", name, err)
	}
	return crd, nil
}
