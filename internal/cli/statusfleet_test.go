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

import (
	"bytes"
	"strings"
	"testing"

	"github.com/graduator/graduator/internal/scan"
)

// A cluster not read is a row with its reason among the others' rows, and
// every cluster has its summary line.
func TestTheFleetTablesShowEveryClusterAndTheOnesNotRead(t *testing.T) {
	down := &ClusterError{Reason: "Unreachable", Message: "dial tcp 127.0.0.1:1: connect: connection refused"}
	statuses := map[string]ClusterStatus{
		"prod": {CRDs: []CRDStatus{{Name: "pizzas.example.com", StorageVersion: "v2", Drift: []string{"v1"}, Policy: "pizzas.example.com",
			Ready: "False", Reason: "Forbidden"}}},
		"edge": {Error: down},
	}
	for name, cs := range statuses {
		cs.Summary = statusSummary(cs)
		statuses[name] = cs
	}
	var out bytes.Buffer
	if err := printClusterStatusTable(&out, []string{"prod", "edge"}, statuses, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CONTEXT", "prod      pizzas.example.com", "edge      -", "Unreachable: dial tcp",
		"\nprod: 1 CRDs, 1 with drift, 1 governed by a policy, 1 stalled\n", "\nedge: not read (Unreachable): dial tcp"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the status table lacks %q:\n%s", want, out.String())
		}
	}

	scans := map[string]ClusterScan{
		"prod": {CRDs: 3, NotChecked: []string{"StorageVersionMigrations (needs list ...)"}, Findings: []scan.Finding{
			{CRD: "pizzas.example.com", Rule: scan.RuleStaleStoredVersions, Severity: scan.Error, Why: "why", Fix: "fix"},
			{CRD: "pizzas.example.com", Rule: scan.RuleWebhookNotChecked, Severity: scan.Info, Why: "why", Fix: "fix"}}},
		"edge": {Error: down},
	}
	for name, cs := range scans {
		cs.Summary = scanSummary(cs)
		scans[name] = cs
	}
	out.Reset()
	if err := printScanTable(&out, []string{"prod", "edge"}, scans); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CONTEXT   CRD", "stale-stored-versions", "cluster-not-read",
		"\nprod: 3 CRDs, 2 findings (1 errors, 0 warnings, 1 info); not checked: StorageVersionMigrations (needs list ...)\n",
		"\nedge: not read (Unreachable)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the scan table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestScanExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		failed []string
		over   int
		want   int
	}{
		{"clean", nil, 0, 0},
		{"findings at or above --fail-on", nil, 3, ExitError},
		{"a cluster not read", []string{"edge"}, 0, ExitBadInput},
		{"a cluster not read wins over findings", []string{"edge"}, 3, ExitBadInput},
	} {
		if got := ExitCode(scanVerdict(2, tc.failed, tc.over, scan.Warning)); got != tc.want {
			t.Errorf("%s: exit %d, want %d", tc.name, got, tc.want)
		}
	}
}
