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
	"reflect"
	"testing"
	"time"

	"github.com/graduator/graduator/internal/graduation"
)

// The steps of a run as `graduator migrate -o json` reports them: a plan
// repeated (the migration's checkpoints) is one step, a wait is its own,
// and the plan with nothing left to do ends the last.
func TestStepClockTimesEachStep(t *testing.T) {
	start := time.Unix(1000, 0)
	clock := newStepClock(start)
	now := start
	clock.now = func() time.Time { return now }
	plan := func(at float64, action graduation.Action) {
		now = start.Add(time.Duration(at * float64(time.Second)))
		clock.Planned(nil, graduation.Step{Action: action}, "")
	}
	plan(0.5, graduation.ActionPreflight)
	plan(30, graduation.ActionNone)
	plan(32, graduation.ActionMigrate)
	plan(90, graduation.ActionMigrate)
	plan(150, graduation.ActionNone)
	plan(151, graduation.ActionPrune)
	now = start.Add(151250 * time.Millisecond)

	want := []stepTime{
		{Action: "Preflight", StartSeconds: 0.5, Seconds: 29.5},
		{Action: waitAction, StartSeconds: 30, Seconds: 2},
		{Action: "Migrate", StartSeconds: 32, Seconds: 118},
		{Action: waitAction, StartSeconds: 150, Seconds: 1},
		{Action: "Prune", StartSeconds: 151, Seconds: 0.25},
	}
	if got := clock.times(); !reflect.DeepEqual(got, want) {
		t.Fatalf("steps:\n got  %+v\n want %+v", got, want)
	}
	plan(152, graduation.ActionNone)
	if got := clock.times(); !reflect.DeepEqual(got, want) {
		t.Fatalf("a last plan with nothing to do is the end, not a step: %+v", got)
	}
}
