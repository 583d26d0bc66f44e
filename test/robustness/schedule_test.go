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

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
)

func TestDrawIsReproducible(t *testing.T) {
	size := Size{Name: "small", Objects: 200, MaxFaults: 3}
	for seed := uint64(1); seed <= 50; seed++ {
		a, b := Draw(seed, size), Draw(seed, size)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d drew two schedules:\n%s\n%s", seed, a, b)
		}
		if len(a.Faults) < 1 || len(a.Faults) > size.MaxFaults {
			t.Fatalf("seed %d: %d faults, want 1..%d", seed, len(a.Faults), size.MaxFaults)
		}
		for i := 1; i < len(a.Faults); i++ {
			if StageRank(a.Faults[i].Stage) < StageRank(a.Faults[i-1].Stage) {
				t.Fatalf("seed %d: faults out of stage order: %s", seed, a)
			}
		}
	}
	if reflect.DeepEqual(Draw(1, size), Draw(2, size)) {
		t.Fatal("seeds 1 and 2 drew the same schedule")
	}
}

// coverSeeds is how many seeds the long target runs (make
// test-robustness RUNS=52): the cover must fit in them.
const coverSeeds = 52

func TestDrawCoversTheMenu(t *testing.T) {
	size := Size{Name: "small", Objects: 200, MaxFaults: 3}
	cover := Cover()
	aimed := map[Aim]int{}
	for seed := uint64(1); seed <= uint64(len(cover)); seed++ {
		s := Draw(seed, size)
		for _, f := range s.Faults {
			aimed[Aim{f.Kind, f.Stage}]++
			if !slices.Contains(stagesIn(f.Kind, s.Door), f.Stage) {
				t.Errorf("seed %d: %s aimed at %s in a run of door %s", seed, f.Kind, f.Stage, s.Door)
			}
		}
	}
	for _, k := range Kinds {
		for _, st := range Stages {
			want := 0
			if slices.Contains(StagesOf(k), st) {
				want = 1
			}
			if aimed[Aim{k, st}] != want {
				t.Errorf("seeds 1-%d aim %s at %s %d times, want %d", len(cover), k, st, aimed[Aim{k, st}], want)
			}
		}
	}
	// A short stage waits for no fault but an instant one: a fault that
	// lasts seconds would often find it over.
	for i, aims := range cover {
		if len(aims) == 2 && slices.Contains(shortStages, aims[1].Stage) && !instant(aims[0].Kind) {
			t.Errorf("seed %d aims %s second, after %s", i+1, aims[1], aims[0])
		}
		late := aims[0].Kind == WebhookDown && StageRank(aims[0].Stage) >= StageRank(StageSweep)
		if len(aims) == 2 && (late || aims[0].Kind == WebhookSlow || aims[0].Kind == WebhookFlap) {
			t.Errorf("seed %d aims %s after %s, which often outlasts it", i+1, aims[1], aims[0])
		}
		if len(aims) == 2 && StageRank(aims[0].Stage) >= StageRank(aims[1].Stage) {
			t.Errorf("seed %d aims %s before %s", i+1, aims[0], aims[1])
		}
	}
	if len(cover) > coverSeeds {
		t.Errorf("the cover takes %d seeds: more than the %d of the long target", len(cover), coverSeeds)
	}
	// Later seeds draw at random, every cell among them.
	random := map[Aim]bool{}
	for seed := uint64(len(cover) + 1); seed <= 2000; seed++ {
		for _, f := range Draw(seed, size).Faults {
			random[Aim{f.Kind, f.Stage}] = true
		}
	}
	if len(random) != len(aimed) {
		t.Errorf("random seeds aim %d cells, the cover %d", len(random), len(aimed))
	}
}

func TestDrawKeepsTheLagWithinTheSettleDelay(t *testing.T) {
	size := Size{Name: "small", Objects: 200, MaxFaults: 3}
	lags := 0
	for seed := uint64(1); seed <= 300; seed++ {
		s := Draw(seed, size)
		for _, f := range s.Faults {
			if f.Kind != LaggingAPIServer {
				continue
			}
			lags++
			if f.After+f.Duration > max(s.SettleDelay, f.After+200*time.Millisecond) || f.Delay <= 0 {
				t.Errorf("seed %d: a lag of %s after %s, every %s, with a settle delay of %s", seed, f.Duration, f.After, f.Delay, s.SettleDelay)
			}
		}
	}
	if lags == 0 {
		t.Fatal("300 seeds drew no lagging API server")
	}
}

func TestDrawKeepsEachDoorToItsMenu(t *testing.T) {
	size := Size{Name: "small", Objects: 200, MaxFaults: 3}
	embedded := 0
	for seed := uint64(1); seed <= 300; seed++ {
		s := Draw(seed, size)
		if s.Door == DoorEmbedded {
			embedded++
			if !slices.ContainsFunc(s.Faults, func(f Fault) bool { return f.Kind == KillEmbedder }) {
				t.Errorf("seed %d: an embedded run without its SIGKILL: %s", seed, s)
			}
		}
		for _, f := range s.Faults {
			if f.Kind != KillEmbedder && !slices.Contains(KindsOf(s.Door), f.Kind) {
				t.Errorf("seed %d: %s in a run of door %s", seed, f.Kind, s.Door)
			}
			if s.Door == DoorEmbedded && !slices.Contains(EmbeddedStages, f.Stage) {
				t.Errorf("seed %d: %s aimed at %s, which an embedded run has not", seed, f.Kind, f.Stage)
			}
		}
	}
	if embedded == 0 || embedded == 300 {
		t.Fatalf("%d embedded runs in 300 seeds", embedded)
	}
}

func TestStageOf(t *testing.T) {
	catchUp := &graduatorv1alpha1.CRDVersionPolicyStatus{Migration: &graduatorv1alpha1.MigrationStatus{CatchUp: true}}
	mainPass := &graduatorv1alpha1.CRDVersionPolicyStatus{Migration: &graduatorv1alpha1.MigrationStatus{}}
	graduated := &graduatorv1alpha1.CRDVersionPolicyStatus{Phase: graduatorv1alpha1.PhaseGraduated}
	for _, tc := range []struct {
		name     string
		step     string
		switched bool
		dryRuns  int
		status   *graduatorv1alpha1.CRDVersionPolicyStatus
		want     Stage
	}{
		{"nothing yet", "", false, 0, nil, StagePending},
		{"preflight before the switch: the sample", "Preflight", false, 4, nil, StagePreflight},
		{"preflight before the switch, the sample's dry runs done: the proof", "Preflight", false, 5, nil, StageProof},
		{"the switch and its settle delay", "SwitchStorage", true, 0, nil, StageSettling},
		{"the checks before the first write", "Preflight", true, 30, nil, StageSettling},
		{"the main pass", "Migrate", true, 0, mainPass, StageMainPass},
		{"the main pass, status not read yet", "Migrate", true, 0, nil, StageMainPass},
		{"the sweep", "Migrate", true, 0, catchUp, StageSweep},
		{"prune", "Prune", true, 0, mainPass, StagePrune},
		{"deprecate", "Deprecate", true, 0, mainPass, StageRetire},
		{"unserve", "Unserve", true, 0, mainPass, StageRetire},
		{"graduated wins over the last step", "Unserve", true, 0, graduated, StageGraduated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := StageOf(tc.step, tc.switched, tc.dryRuns, tc.status); got != tc.want {
				t.Errorf("StageOf(%q, %t) = %q, want %q", tc.step, tc.switched, got, tc.want)
			}
		})
	}
}

func TestPhaseWentBack(t *testing.T) {
	p := func(phases ...graduatorv1alpha1.Phase) []graduatorv1alpha1.Phase { return phases }
	const (
		pre  = graduatorv1alpha1.PhasePreflight
		mig  = graduatorv1alpha1.PhaseMigrating
		blk  = graduatorv1alpha1.PhaseBlocked
		ret  = graduatorv1alpha1.PhaseRetiring
		grad = graduatorv1alpha1.PhaseGraduated
	)
	for _, tc := range []struct {
		name   string
		phases []graduatorv1alpha1.Phase
		want   graduatorv1alpha1.Phase
	}{
		{"forward", p(pre, mig, ret, grad), ""},
		{"blocked in between", p(pre, blk, pre, mig, blk, mig, grad), ""},
		{"graduated back to migrating", p(mig, grad, mig), mig},
		{"retiring back to migrating through blocked", p(mig, ret, blk, mig), mig},
		{"graduated, the storage set back, the graduation again", p(mig, grad, StorageSetBack, pre, mig, grad), ""},
		{"a set-back allows one start over, not two", p(mig, StorageSetBack, pre, mig, pre), pre},
		{"back before the set-back", p(ret, mig, StorageSetBack, pre), mig},
		{"a status planned before the set-back, written after it", p(mig, StorageSetBack, ret, mig, ret, grad), ""},
		{"two set-backs, two start overs", p(mig, StorageSetBack, StorageSetBack, ret, mig, pre, mig), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := PhaseWentBack(tc.phases); got != tc.want {
				t.Errorf("PhaseWentBack(%v) = %q, want %q", tc.phases, got, tc.want)
			}
		})
	}
}

func TestReplicasAndSetBacks(t *testing.T) {
	for _, tc := range []struct {
		kinds              []Kind
		replicas, setBacks int
	}{
		{[]Kind{KillManager}, 1, 0},
		{[]Kind{KillManager, LeaderMove}, 2, 0},
		{[]Kind{CRDStorageBack, CRDAddVersion, CRDStorageBack}, 1, 2},
	} {
		var s Schedule
		for _, k := range tc.kinds {
			s.Faults = append(s.Faults, Fault{Kind: k})
		}
		if s.Replicas() != tc.replicas || s.StorageSetBacks() != tc.setBacks {
			t.Errorf("%v: %d replicas, %d set-backs; want %d, %d", tc.kinds, s.Replicas(), s.StorageSetBacks(), tc.replicas, tc.setBacks)
		}
	}
}

func TestStormBound(t *testing.T) {
	if got := StormBound(1000, 37, 0); got != 1237 {
		t.Errorf("StormBound(1000, 37, 0) = %d, want 1237", got)
	}
	if got := StormBound(1000, 37, 1); got != 2474 {
		t.Errorf("StormBound(1000, 37, 1) = %d, want 2474", got)
	}
}
