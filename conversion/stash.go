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

package conversion

import (
	"encoding/json"
	"fmt"
	"maps"
)

// Stash returns the annotations with lost (the fields an older version cannot
// hold) stored under dataAnnotation, or without that annotation
// when there is nothing to keep. The input map is not modified; a map left
// empty becomes nil again, so a round trip gives back what it was given.
func Stash(annotations map[string]string, lost any, nothingLost bool) (map[string]string, error) {
	if nothingLost {
		return annotations, nil
	}
	data, err := json.Marshal(lost)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", dataAnnotation, err)
	}
	out := maps.Clone(annotations)
	if out == nil {
		out = map[string]string{}
	}
	out[dataAnnotation] = string(data)
	return out, nil
}

// Unstash decodes the stashed fields into lost and returns the annotations
// without dataAnnotation. found is false when there was none.
func Unstash(annotations map[string]string, lost any) (rest map[string]string, found bool, err error) {
	data, ok := annotations[dataAnnotation]
	if !ok {
		return annotations, false, nil
	}
	if err := json.Unmarshal([]byte(data), lost); err != nil {
		return nil, false, fmt.Errorf("decode %s: %w", dataAnnotation, err)
	}
	rest = maps.Clone(annotations)
	delete(rest, dataAnnotation)
	if len(rest) == 0 {
		rest = nil
	}
	return rest, true, nil
}
