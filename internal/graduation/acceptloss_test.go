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

package graduation

import "testing"

// Each door's refusal of a lossy conversion names its own way to accept it.
func TestAcceptLossAdvice(t *testing.T) {
	for _, tc := range []struct {
		at    AcceptLoss
		paths []string
		want  string
	}{
		{AcceptLossPolicy, []string{"/spec/replicas"}, "list the paths in spec.migration.acceptLoss"},
		{AcceptLossFlag, []string{"/spec/replicas"}, "accept them with --accept-loss /spec/replicas"},
		{AcceptLossFlag, []string{"/spec/paused", "/spec/tier"}, "accept them with --accept-loss /spec/paused --accept-loss /spec/tier"},
		{AcceptLossFlag, []string{"/spec/parts/*/n"}, "accept them with --accept-loss '/spec/parts/*/n'"},
		{AcceptLossFlag, []string{"/metadata/annotations/example.com~1it's"}, `accept them with --accept-loss '/metadata/annotations/example.com~1it'\''s'`},
		{"crdmigrate.Options.AcceptLoss", []string{"/spec/paused", "/spec/replicas"},
			"list the paths in crdmigrate.Options.AcceptLoss: /spec/paused, /spec/replicas"},
	} {
		if got := tc.at.Advice(tc.paths); got != tc.want {
			t.Errorf("AcceptLoss(%q).Advice(%q) = %q, want %q", tc.at, tc.paths, got, tc.want)
		}
	}
}
