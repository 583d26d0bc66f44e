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
	"math"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
)

// stepTime is how long one step of `graduator migrate` took, as -o json
// prints it: where a long run's time went (the proof is Preflight's; the
// wait for the switch to settle, the main pass and the catch-up sweep are
// Migrate's, and its page records split them).
type stepTime struct {
	Action string `json:"action"`
	// StartSeconds is when the step was first planned, counted from the
	// same start as the page records' elapsedSeconds.
	StartSeconds float64 `json:"startSeconds"`
	Seconds      float64 `json:"seconds"`
}

// stepClock is the CLI's driver.Reporter: it reports nothing (the progress
// and the summary tell the user) and times each step, from the first plan
// of an action to the first plan of the next.
type stepClock struct {
	start time.Time
	now   func() time.Time
	// progress, when set, is told every plan: what the run waits for, and
	// when it starts writing.
	progress *progressReporter

	mu    sync.Mutex
	steps []stepTime
}

func newStepClock(start time.Time) *stepClock { return &stepClock{start: start, now: time.Now} }

func (*stepClock) Event(*graduatorv1alpha1.CRDVersionPolicy, *apiextensionsv1.CustomResourceDefinition, string, string, string, string) {
}

// waitAction names a plan with nothing to do yet (the switch has not
// settled in discovery, say).
const waitAction = "Wait"

// Planned starts a step when the plan's action differs from the last one
// timed.
func (c *stepClock) Planned(_ *graduatorv1alpha1.CRDVersionPolicy, step graduation.Step, _ graduatorv1alpha1.Phase) {
	if c.progress != nil {
		c.progress.planned(step)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	action := string(step.Action)
	if step.Action == graduation.ActionNone {
		action = waitAction
	}
	if n := len(c.steps); n > 0 && c.steps[n-1].Action == action {
		return
	}
	c.endLast()
	c.steps = append(c.steps, stepTime{Action: action, StartSeconds: c.since(), Seconds: -1})
}

// times ends the step in progress and returns every step timed so far; a
// last plan with nothing to do is the run's end, not a step.
func (c *stepClock) times() []stepTime {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endLast()
	steps := c.steps
	if n := len(steps); n > 0 && steps[n-1].Action == waitAction {
		steps = steps[:n-1]
	}
	return append([]stepTime(nil), steps...)
}

func (c *stepClock) endLast() {
	if n := len(c.steps); n > 0 && c.steps[n-1].Seconds < 0 {
		c.steps[n-1].Seconds = roundMillis(c.since() - c.steps[n-1].StartSeconds)
	}
}

func (c *stepClock) since() float64 { return roundMillis(c.now().Sub(c.start).Seconds()) }

func roundMillis(s float64) float64 { return math.Round(s*1000) / 1000 }
