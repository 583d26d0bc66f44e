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

	"github.com/graduator/graduator/internal/prepare"
	"github.com/graduator/graduator/migration"
)

// Off a terminal, a line per event: the plan, the CRD started, a page, the
// CRD done, the cluster's outcome.
func TestFleetViewLines(t *testing.T) {
	var buf bytes.Buffer
	v := newFleetView(&buf, []cluster{{Context: "prod-eu"}}, progressLines)
	c := v.cluster(0)
	c.planned(prepare.Plan{CRDs: []prepare.CRDPlan{{CRD: "widgets.example.com", Verdict: prepare.Migrate, StorageVersion: "v2",
		Why: []string{"status.storedVersions lists v1, which the release drops"}}}})
	c.started(0, "widgets.example.com")
	c.progress(migration.Progress{Listed: 100, Remaining: 100, Rewritten: 100, Continue: "next"})
	c.crdDone(PreparedCRD{CRDPlan: prepare.CRDPlan{CRD: "widgets.example.com"}, Outcome: OutcomeReady, Rewritten: 200,
		StoredVersions: []string{"v2"}})
	c.finished(PreparedCluster{Outcome: OutcomeReady})
	v.stop()
	want := []string{
		"prod-eu: plan: 1 CRDs to migrate, 0 refused, 0 findings reported",
		"prod-eu: Migrate widgets.example.com: status.storedVersions lists v1, which the release drops",
		"prod-eu: widgets.example.com: started",
		"prod-eu: CRD 1/1 widgets.example.com: 100/200 (50%), 100 rewritten",
		"prod-eu: widgets.example.com: Ready, 200 rewritten, 0 skipped, 0 failed, storedVersions [v2]",
		"prod-eu: Ready",
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q, want it to start with %q", i, lines[i], w)
		}
	}
}

// On a terminal, one line per cluster, redrawn in place: its current CRD
// and its bar (80 columns leave no room for the bar itself), or its
// outcome.
func TestFleetViewTerminal(t *testing.T) {
	var buf bytes.Buffer
	v := newFleetView(&buf, []cluster{{Context: "a"}, {Context: "b"}}, progressQuiet)
	v.mode = progressBar // drawn by hand below, without the ticker
	v.cluster(0).started(0, "widgets.example.com")
	v.cluster(0).n = 2
	v.cluster(0).progress(migration.Progress{Listed: 50, Remaining: 50, Rewritten: 50, Continue: "next"})
	v.cluster(1).finished(PreparedCluster{Outcome: OutcomeRefused, Why: "widgets.example.com: the conversion does not round-trip"})
	v.mu.Lock()
	v.draw()
	v.draw()
	v.mu.Unlock()
	out := buf.String()
	for _, want := range []string{"a: CRD 1/2 ", " 50% 50/100 ", "b: Refused: widgets.example.com: the conversion",
		"\x1b[2A"} {
		if !strings.Contains(out, want) {
			t.Errorf("%q not drawn:\n%q", want, out)
		}
	}
}

// The dry run says each step of a CRD's plan, in the order it is taken.
func TestPlannedSteps(t *testing.T) {
	for _, tc := range []struct {
		name string
		plan prepare.CRDPlan
		want string
	}{
		{"a migration", prepare.CRDPlan{Verdict: prepare.Migrate, StorageVersion: "v2"}, "migrate to v2 and prune"},
		{"a storage version to serve", prepare.CRDPlan{Verdict: prepare.Migrate, StorageVersion: "v1", ServeFrom: prepare.ServeFromCluster},
			"serve v1 (its schema from the cluster's CRD), migrate to v1 and prune"},
		{"a rollback across a webhook", prepare.CRDPlan{Verdict: prepare.Rollback, StorageVersion: "v1", From: "v2",
			ServeFrom: prepare.ServeFromRelease, Webhook: "Service ns/conv"},
			"roll back from v2 to v1: add v1 as the release defines it, served, prove v2 -> v1 -> v2 (a loss refuses, unless " +
				"--accept-loss names it), make v1 the storage version, rewrite every object as v1, prune storedVersions to [v1], " +
				"reading through the conversion webhook Service ns/conv, which must keep running until the rewrite ends"},
	} {
		if got := plannedSteps(tc.plan); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}
