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

package v1

import (
	"encoding/json"
	"fmt"
	"maps"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	v2 "github.com/graduator/graduator/examples/api/v2"
)

// stashAnnotation keeps, on a v1 object, what v1 cannot hold (the authors
// after the first, the ISBN), so that a round trip through v1 loses nothing.
const stashAnnotation = "bookstore.example.com/v2-fields"

type stash struct {
	Authors []string `json:"authors,omitempty"`
	ISBN    string   `json:"isbn,omitempty"`
}

// ConvertTo converts this Book to the hub version, v2.
func (src *Book) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*v2.Book)
	if !ok {
		return fmt.Errorf("v1 Book converts to *v2.Book, not %T", dstRaw)
	}
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Spec.Title = src.Spec.Title
	if src.Spec.Author != "" {
		dst.Spec.Authors = []string{src.Spec.Author}
	}
	if raw, ok := src.Annotations[stashAnnotation]; ok {
		var s stash
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			return fmt.Errorf("convert Book %s/%s to v2: annotation %s: %w", src.Namespace, src.Name, stashAnnotation, err)
		}
		if len(s.Authors) > 0 {
			dst.Spec.Authors = s.Authors
		}
		dst.Spec.ISBN = s.ISBN
		dst.Annotations = maps.Clone(dst.Annotations)
		delete(dst.Annotations, stashAnnotation)
		if len(dst.Annotations) == 0 {
			dst.Annotations = nil
		}
	}
	return nil
}

// ConvertFrom converts the hub version, v2, to this version.
func (dst *Book) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*v2.Book)
	if !ok {
		return fmt.Errorf("v1 Book converts from *v2.Book, not %T", srcRaw)
	}
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Spec.Title = src.Spec.Title
	if len(src.Spec.Authors) > 0 {
		dst.Spec.Author = src.Spec.Authors[0]
	}
	if len(src.Spec.Authors) > 1 || src.Spec.ISBN != "" {
		data, err := json.Marshal(stash{Authors: src.Spec.Authors, ISBN: src.Spec.ISBN})
		if err != nil {
			return err
		}
		dst.Annotations = maps.Clone(dst.Annotations)
		if dst.Annotations == nil {
			dst.Annotations = map[string]string{}
		}
		dst.Annotations[stashAnnotation] = string(data)
	}
	return nil
}
