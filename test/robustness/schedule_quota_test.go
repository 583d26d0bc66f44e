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

package robustness

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestWithNearQuotaKeepsTheSeedsPace(t *testing.T) {
	size := Size{Name: "small", Objects: 120, MaxFaults: 2}
	ends, headrooms, combined := map[Stage]bool{}, map[int64]bool{}, 0
	for seed := uint64(1); seed <= 200; seed++ {
		drawn := Draw(seed, size)
		s := WithNearQuota(drawn, time.Minute)
		if !reflect.DeepEqual(s, WithNearQuota(Draw(seed, size), time.Minute)) {
			t.Fatalf("seed %d drew two schedules", seed)
		}
		if s.ClientEvery != max(drawn.ClientEvery, NearQuotaClientEvery) {
			t.Errorf("seed %d: the client every %s, want at most every %s", seed, s.ClientEvery, NearQuotaClientEvery)
		}
		pace := func(s Schedule) Schedule {
			s.Faults, s.Door, s.Paced, s.ClientEvery = nil, "", 0, 0
			return s
		}
		if !reflect.DeepEqual(pace(s), pace(drawn)) {
			t.Fatalf("seed %d: the pace changed:\n%s\n%s", seed, drawn, s)
		}
		if s.Door != DoorOperator {
			t.Fatalf("seed %d: %s, want it through the operator", seed, s)
		}
		f := s.Faults[0]
		if f.Kind != NearQuota || f.Stage != StagePreflight {
			t.Fatalf("seed %d: first fault %s, want etcd-near-quota before the run", seed, f)
		}
		for _, d := range drawn.Faults {
			if d.Kind != KillEmbedder && !slices.Contains(s.Faults, d) {
				t.Errorf("seed %d: the drawn fault %s is gone: near-quota comes with the seed's other faults", seed, d)
			}
		}
		if slices.ContainsFunc(s.Faults, func(d Fault) bool { return d.Kind == KillEmbedder }) {
			t.Errorf("seed %d: kill-embedder in an operator run", seed)
		}
		if !slices.ContainsFunc(s.Faults, resumesInPass) {
			t.Errorf("seed %d: %s, want a run resumed in the main pass near the ceiling", seed, s)
		}
		if len(s.Faults) > 1 {
			combined++
		}
		if !slices.Contains(NearQuotaEnds, f.Until) {
			t.Errorf("seed %d: removed at %s, want one of %v", seed, f.Until, NearQuotaEnds)
		}
		if f.Headroom < NearQuotaHeadroom[0] || f.Headroom > NearQuotaHeadroom[1] {
			t.Errorf("seed %d: headroom %d outside %v", seed, f.Headroom, NearQuotaHeadroom)
		}
		if got, want := s.WorkBound()-drawn.WorkBound(), 2*time.Minute; got != want {
			t.Errorf("seed %d: the work bound grew by %s, want twice the pacing %s", seed, got, want)
		}
		ends[f.Until], headrooms[f.Headroom] = true, true
	}
	if combined != 200 {
		t.Errorf("%d of 200 seeds drew etcd-near-quota with other faults, want all", combined)
	}
	if len(ends) != len(NearQuotaEnds) || len(headrooms) < 5 {
		t.Errorf("200 seeds drew the ends %v and %d headrooms", ends, len(headrooms))
	}
	if slices.Contains(Kinds, NearQuota) || slices.Contains(KindsOf(DoorEmbedded), NearQuota) {
		t.Error("etcd-near-quota is in the default menu: the default seeds would draw other schedules")
	}
}

func TestWithoutPassKillIsTheSameRunUninterrupted(t *testing.T) {
	size := Size{Name: "small", Objects: 120, MaxFaults: 2}
	for seed := uint64(1); seed <= 50; seed++ {
		s := WithNearQuota(Draw(seed, size), time.Minute)
		twin := WithoutPassKill(s)
		if slices.ContainsFunc(twin.Faults, resumesInPass) {
			t.Errorf("seed %d: the twin %s still stops the manager in the main pass", seed, twin)
		}
		var kept []Fault
		for _, f := range s.Faults {
			if !resumesInPass(f) {
				kept = append(kept, f)
			}
		}
		if !reflect.DeepEqual(twin.Faults, kept) {
			t.Errorf("seed %d: the twin's faults %v, want the run's but the kill in the pass %v", seed, twin.Faults, kept)
		}
		twin.Faults, s.Faults = nil, nil
		if !reflect.DeepEqual(twin, s) {
			t.Errorf("seed %d: the twin's pace differs:\n%s\n%s", seed, s, twin)
		}
	}
}

func TestPacedPass(t *testing.T) {
	for _, tc := range []struct {
		name             string
		pass, budget     int64
		interval, expect time.Duration
	}{
		{"no budget", 8 << 20, -1, 2 * time.Second, 0},
		{"nothing to write", 0, 1 << 20, 2 * time.Second, 0},
		{"under one budget: one compaction", 512 << 10, 1 << 20, 2 * time.Second, 16 * time.Second},
		{"8 budgets", 8 << 20, 1 << 20, 2 * time.Second, 8 * 16 * time.Second},
		{"a part of a budget counts whole", 8<<20 + 1, 1 << 20, 2 * time.Second, 9 * 16 * time.Second},
		{"slower compactions", 4 << 20, 1 << 20, 30 * time.Second, 4 * 128 * time.Second},
	} {
		if got := PacedPass(tc.pass, tc.budget, tc.interval); got != tc.expect {
			t.Errorf("%s: PacedPass(%d, %d, %s) = %s, want %s", tc.name, tc.pass, tc.budget, tc.interval, got, tc.expect)
		}
	}
}
