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

package main

import "testing"

func TestWriteWindow(t *testing.T) {
	for _, tc := range []struct {
		name        string
		revisions   []int64
		first, last int64
		from, to    int
		ok          bool
	}{
		{"from the last sample before the first write to the first after the last", []int64{10, 11, 60, 120, 180, 181, 182}, 12, 178, 1, 4, true},
		{"a sample at exactly the last write ends it", []int64{10, 50, 100, 101}, 11, 100, 0, 2, true},
		{"a sample that saw the first write is after the window's start", []int64{10, 12, 60, 101}, 12, 100, 0, 3, true},
		{"other writers' revisions around the writes stay out", []int64{10, 14, 19, 60, 90, 95, 99}, 20, 88, 2, 4, true},
		{"a pause inside the window stays in it", []int64{10, 50, 51, 52, 100, 101}, 11, 98, 0, 4, true},
		{"no sample before the first write", []int64{20, 40}, 15, 38, -1, 1, false},
		{"no sample after the last write", []int64{10, 40}, 11, 45, 0, -1, false},
		{"no sample", nil, 1, 2, -1, -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from, to, ok := writeWindow(tc.revisions, tc.first, tc.last)
			if from != tc.from || to != tc.to || ok != tc.ok {
				t.Errorf("writeWindow(%v, %d, %d) = %d, %d, %t; want %d, %d, %t", tc.revisions, tc.first, tc.last, from, to, ok, tc.from, tc.to, tc.ok)
			}
		})
	}
}

func TestMachineLimit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cpus   int
		server []float64
		want   float64
	}{
		{"the least cost any contender caused", 2, []float64{0.004, 0.002, 0.0025}, 1000},
		{"contenders not measured are ignored", 2, []float64{0, 0.004}, 500},
		{"none measured", 2, []float64{0, 0}, 0},
		{"no contender", 2, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := machineLimit(tc.cpus, tc.server); got != tc.want {
				t.Errorf("machineLimit(%d, %v) = %v, want %v", tc.cpus, tc.server, got, tc.want)
			}
		})
	}
}

func TestCPUOfStat(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       float64
		err        bool
	}{
		{"utime and stime", "4242 (etcd) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 12 0 1000 1 1", 3.25, false},
		{"a command name with spaces and parentheses", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 1 1 1", 0.03, false},
		{"truncated", "7 (x) R 1 7", 0, true},
		{"no command name", "7 x R", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cpuOfStat(tc.stat)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("cpuOfStat(%q) = %v, %v; want %v, error %t", tc.stat, got, err, tc.want, tc.err)
			}
		})
	}
}
