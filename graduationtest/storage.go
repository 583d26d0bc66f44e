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
)

// Storage is what etcd holds of a CRD's objects: the apiVersion each one is
// encoded in, read from etcd itself (the API server would convert).
type Storage struct {
	// CRD is the CRD's name.
	CRD string
	// Objects maps "namespace/name" ("name" when cluster-scoped) to the
	// apiVersion the object is stored as.
	Objects map[string]string
}

// Count is how many objects are stored as apiVersion.
func (s Storage) Count(apiVersion string) int {
	n := 0
	for _, v := range s.Objects {
		if v == apiVersion {
			n++
		}
	}
	return n
}

// NotAs returns the objects not stored as apiVersion, sorted.
func (s Storage) NotAs(apiVersion string) []string {
	var out []string
	for k, v := range s.Objects {
		if v != apiVersion {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// String reads "pizzas.restaurant.example.com: 150 objects: 100 as
// restaurant.example.com/v1beta1, 50 as restaurant.example.com/v1alpha1".
func (s Storage) String() string {
	counts := map[string]int{}
	for _, v := range s.Objects {
		counts[v]++
	}
	if len(counts) == 0 {
		return s.CRD + ": no objects"
	}
	parts := make([]string, 0, len(counts))
	for _, v := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d as %s", counts[v], v))
	}
	return fmt.Sprintf("%s: %d objects: %s", s.CRD, len(s.Objects), strings.Join(parts, ", "))
}

// Stored reads what etcd holds of the objects of the CRD named crdName. It
// fails the test when it cannot.
func (r *Rehearsal) Stored(ctx context.Context, crdName string) Storage {
	r.helper()
	s, err := r.TryStored(ctx, crdName)
	r.fatal(err)
	return s
}

// TryStored is Stored returning an error.
func (r *Rehearsal) TryStored(ctx context.Context, crdName string) (Storage, error) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := r.Client.Get(ctx, client.ObjectKey{Name: crdName}, &crd); err != nil {
		return Storage{}, fmt.Errorf("get CRD %s: %w", crdName, err)
	}
	objects, err := r.Etcd.APIVersions(ctx, crd.Spec.Group, crd.Spec.Names.Plural)
	if err != nil {
		return Storage{}, err
	}
	return Storage{CRD: crdName, Objects: objects}, nil
}
