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

package cli

import "testing"

func TestAcceptLossFlags(t *testing.T) {
	for _, tc := range []struct {
		paths []string
		want  string
	}{
		{[]string{"/spec/replicas"}, "accept them with --accept-loss /spec/replicas"},
		{[]string{"/spec/paused", "/spec/tier"}, "accept them with --accept-loss /spec/paused --accept-loss /spec/tier"},
		{[]string{"/spec/parts/*/n"}, "accept them with --accept-loss '/spec/parts/*/n'"},
		{[]string{"/metadata/annotations/example.com~1it's"}, `accept them with --accept-loss '/metadata/annotations/example.com~1it'\''s'`},
	} {
		if got := acceptLossFlags(tc.paths); got != tc.want {
			t.Errorf("acceptLossFlags(%q) = %q, want %q", tc.paths, got, tc.want)
		}
	}
}
