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
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// writeVersion is the version an object's no-op write is sent at: an old
// version of Options.WriteVersions when every managedFields entry of the
// object was recorded at it, else the storage version.
//
// What a write costs the API server: its field manager converts the live
// object once per managedFields entry recorded at a version other than the
// request's, and the old and the new object once per such version, and the
// write runs twice (its first try meets the watch cache's copy); through a
// conversion webhook each of these is a ConversionReview. An object with two
// entries at an old version takes about twice as many ConversionReviews
// written at the storage version as written at that old version (the
// bench's webhook section counts them).
//
// Why every entry and not most of them: an entry at another version means
// someone wrote the object there, possibly fields the old version cannot
// hold, which a round trip through the old version would drop. When every
// writer wrote at the old version, the object's content is what that
// version holds: stored in the old version, the write converts it to the
// storage version as the write at the storage version would; already
// stored in the storage version, it came there through the old version, and
// the round trip the proof covers (old -> storage -> old, by a dry run of
// this very write) brings it back unchanged. An object without entries
// gains nothing from an old version.
func writeVersion(entries []metav1.ManagedFieldsEntry, oldVersions []string, storage string) string {
	if len(entries) == 0 || len(oldVersions) == 0 {
		return storage
	}
	at := apiVersionOf(entries[0].APIVersion)
	for _, e := range entries[1:] {
		if apiVersionOf(e.APIVersion) != at {
			return storage
		}
	}
	i := slices.Index(oldVersions, at)
	if at == storage || i < 0 {
		return storage
	}
	return oldVersions[i] // not at: the apiVersion's string stays unreferenced
}

// apiVersionOf is the version of an apiVersion ("group/version" or "version");
// empty when it does not parse.
func apiVersionOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return ""
	}
	return gv.Version
}
