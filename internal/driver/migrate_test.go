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

package driver

import (
	"strings"
	"testing"

	"github.com/graduator/graduator/migration"
)

// The sweep's way travels through the policy status (the CLI reads its
// result from there): what the engine said is what the status gives back.
func TestSweepSurvivesTheStatus(t *testing.T) {
	long := strings.Repeat("x", 600)
	for _, tc := range []struct {
		name           string
		mode           migration.SweepMode
		reason         string
		status         string
		wantMode       migration.SweepMode
		wantReasonHead string
	}{
		{"not started", "", "", "", "", ""},
		{"watch", migration.SweepWatch, "the watch from the checkpoint saw every write up to revision 9",
			"watch: the watch from the checkpoint saw every write up to revision 9", migration.SweepWatch, "the watch from"},
		{"list, a reason with a colon", migration.SweepList, "no permission to watch: forbidden",
			"list: no permission to watch: forbidden", migration.SweepList, "no permission to watch: forbidden"},
		{"a long reason is cut to the field's bound", migration.SweepList, long, "", migration.SweepList, "xxx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sweepOf(migration.Progress{SweepMode: tc.mode, SweepReason: tc.reason})
			if tc.status != "" && got != tc.status {
				t.Errorf("sweepOf = %q, want %q", got, tc.status)
			}
			if len(got) > maxSweep {
				t.Errorf("sweepOf is %d bytes, more than the status field's %d", len(got), maxSweep)
			}
			mode, reason := sweepFrom(got)
			if mode != tc.wantMode || !strings.HasPrefix(reason, tc.wantReasonHead) {
				t.Errorf("sweepFrom(%q) = %q, %q; want %q, %q...", got, mode, reason, tc.wantMode, tc.wantReasonHead)
			}
		})
	}
}
