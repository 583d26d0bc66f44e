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
	"strings"
	"testing"
)

func TestAReportNamesTheObjectsLeftInAnOldVersion(t *testing.T) {
	objects := map[string]string{"ns/a": "batch.example.com/v1", "ns/b": "batch.example.com/v1",
		"ns/c": "batch.example.com/v1", "ns/d": "batch.example.com/v2"}
	for _, tc := range []struct {
		name   string
		report Report
		want   string
	}{
		{
			name: "pruned with objects left behind",
			report: Report{CRD: "jobs.batch.example.com", Version: "v2", StoredVersionsAfter: []string{"v2"},
				After: Storage{CRD: "jobs.batch.example.com", Objects: objects}},
			want: "3 objects still stored as batch.example.com/v1 when storedVersions was pruned (ns/a, ns/b, ns/c)",
		},
		{
			name: "not pruned",
			report: Report{CRD: "jobs.batch.example.com", Version: "v2", StoredVersionsAfter: []string{"v1", "v2"},
				After: Storage{CRD: "jobs.batch.example.com", Objects: map[string]string{"ns/d": "batch.example.com/v2"}}},
			want: "status.storedVersions of jobs.batch.example.com is [v1, v2], not [v2], after the migration",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.report.check()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("got %v, want it to start with %q", err, tc.want)
			}
		})
	}
	ok := Report{CRD: "jobs.batch.example.com", Version: "v2", StoredVersionsAfter: []string{"v2"},
		After: Storage{Objects: map[string]string{"ns/d": "batch.example.com/v2"}}}
	if err := ok.check(); err != nil {
		t.Fatalf("a clean graduation: %v", err)
	}
}
