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

import "testing"

func TestPrepareVerdict(t *testing.T) {
	tests := []struct {
		name     string
		outcomes []string
		exitCode bool
		want     int
	}{
		{"every cluster ready", []string{OutcomeReady, OutcomeReady}, false, 0},
		{"a dry run's plan", []string{OutcomePlanned, OutcomeReady}, false, 0},
		{"one refused", []string{OutcomeReady, OutcomeRefused}, false, ExitError},
		{"one refused and one unreachable: a person must act", []string{OutcomeRefused, OutcomeUnreachable}, false, ExitError},
		{"one unreachable", []string{OutcomeReady, OutcomeUnreachable}, false, ExitBadInput},
		{"one interrupted", []string{OutcomeUnfinished, OutcomeReady}, false, ExitBadInput},
		{"--exit-code: a dry run's plan is work to do", []string{OutcomePlanned, OutcomeReady}, true, ExitPlanned},
		{"--exit-code: nothing planned anywhere", []string{OutcomeReady, OutcomeReady}, true, 0},
		{"--exit-code: a refusal still wins over a plan", []string{OutcomePlanned, OutcomeRefused}, true, ExitError},
		{"--exit-code: an unread cluster wins over a plan (the answer is incomplete)", []string{OutcomePlanned, OutcomeUnreachable}, true, ExitBadInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := map[string]PreparedCluster{}
			var contexts []string
			for i, o := range tt.outcomes {
				name := string(rune('a' + i))
				contexts = append(contexts, name)
				out[name] = PreparedCluster{Outcome: o}
			}
			if got := ExitCode(prepareVerdict(contexts, out, tt.exitCode)); got != tt.want {
				t.Errorf("exit %d, want %d", got, tt.want)
			}
		})
	}
}

func TestClusterOutcome(t *testing.T) {
	crds := func(outcomes ...string) []PreparedCRD {
		var out []PreparedCRD
		for _, o := range outcomes {
			out = append(out, PreparedCRD{Outcome: o})
		}
		return out
	}
	tests := []struct {
		name string
		crds []PreparedCRD
		done string
		want string
	}{
		{"nothing to do", nil, OutcomeReady, OutcomeReady},
		{"every CRD ready", crds(OutcomeReady, OutcomeReady), OutcomeReady, OutcomeReady},
		{"a refused CRD refuses the cluster", crds(OutcomeReady, OutcomeRefused, OutcomeUnfinished), OutcomeReady, OutcomeRefused},
		{"an unfinished CRD leaves it unfinished", crds(OutcomeReady, OutcomeUnfinished), OutcomeReady, OutcomeUnfinished},
		{"a dry run with a plan", crds(OutcomePlanned), OutcomePlanned, OutcomePlanned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := clusterOutcome(tt.crds, tt.done); got != tt.want {
				t.Errorf("%s, want %s", got, tt.want)
			}
		})
	}
}
