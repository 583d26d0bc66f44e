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
	"testing"

	"github.com/graduator/graduator/internal/limit"
)

// A page is sized by the writers the limit allows, at least a 200th of
// the objects left, at most PageSize.
func TestPageSizeFollowsTheWritersAndTheObjectsLeft(t *testing.T) {
	for _, c := range []struct {
		name      string
		writers   int
		remaining int64
		pageSize  int64
		want      int64
	}{
		{"one writer, the first page (nothing known of what is left)", 1, -1, 500, 50},
		{"one writer, 3,000 left", 1, 3000, 500, 50},
		{"4 writers", 4, 3000, 500, 64},
		{"32 writers: PageSize", 32, 3000, 500, 500},
		{"64 writers: PageSize", 64, 3000, 500, 500},
		{"one writer, 40,000 left: a 200th of them", 1, 40000, 500, 200},
		{"one writer, 1,000,000 left: PageSize", 1, 1000000, 500, 500},
		{"a PageSize under the least page: PageSize", 1, 3000, 25, 25},
	} {
		r := &runner{opts: Options{PageSize: c.pageSize}, writers: limit.New(c.writers, true, limit.Background)}
		if got := r.pageSize(c.remaining); got != c.want {
			t.Errorf("%s: page of %d, want %d", c.name, got, c.want)
		}
	}
}
