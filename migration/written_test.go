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

package migration

import "testing"

func TestWrittenRangesRoundTripAndMembership(t *testing.T) {
	resumed := parseWritten("10-12,20")
	got := writtenRanges(resumed, []uint64{13, 14, 18, 21, 30})
	if want := "10-14,18,20-21,30"; got != want {
		t.Fatalf("encoded %q, want %q", got, want)
	}
	ranges := parseWritten(got + ",junk,9-3")
	for v, want := range map[uint64]bool{9: false, 10: true, 14: true, 15: false, 18: true, 19: false, 21: true, 30: true, 31: false} {
		if inRanges(ranges, v) != want {
			t.Errorf("inRanges(%d) = %t, want %t", v, !want, want)
		}
	}
	many := make([]uint64, 0, 2*maxWrittenRanges)
	for i := range 2 * maxWrittenRanges {
		many = append(many, uint64(2*i))
	}
	if n := len(parseWritten(writtenRanges(nil, many))); n != maxWrittenRanges {
		t.Fatalf("kept %d ranges, want at most %d", n, maxWrittenRanges)
	}
}
