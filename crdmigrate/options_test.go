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

package crdmigrate

import (
	"strings"
	"testing"
)

func TestOptionsMustNameWhatToGraduateAndWhere(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string // "" when valid
	}{
		{name: "a CRD", opts: Options{CRDs: []string{"widgets.example.com"}}},
		{name: "a group", opts: Options{Groups: []string{"example.com"}, WriteTo: "Status"}},
		{name: "nothing selected", opts: Options{}, want: "set CRDs or Groups"},
		{name: "an unknown write target", opts: Options{CRDs: []string{"a.b"}, WriteTo: "Scale"}, want: `unknown WriteTo "Scale"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if d := (Options{}).withDefaults(); d.SettleDelay != DefaultSettleDelay || d.Name != DefaultName || d.MaxConcurrentMigrations != 1 {
		t.Fatalf("defaults: %+v", d)
	}
	if d := (Options{SettleDelay: -1}).withDefaults(); d.SettleDelay != 0 {
		t.Fatalf("a negative SettleDelay is none, got %s", d.SettleDelay)
	}
}
