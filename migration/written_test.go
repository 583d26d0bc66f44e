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

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestWrittenRangesRoundTripAndMembership(t *testing.T) {
	resumed := parseWritten("10-12,20")
	got := writtenRanges(resumed, setOf(13, 14, 18, 21, 30).ranges(maxWrittenRanges))
	if want := "10-14,18,20-21,30"; got != want {
		t.Fatalf("encoded %q, want %q", got, want)
	}
	ranges := parseWritten(got + ",junk,9-3")
	for v, want := range map[uint64]bool{9: false, 10: true, 14: true, 15: false, 18: true, 19: false, 21: true, 30: true, 31: false} {
		if inRanges(ranges, v) != want {
			t.Errorf("inRanges(%d) = %t, want %t", v, !want, want)
		}
	}
	var many revisionSet
	for i := range 2 * maxWrittenRanges {
		many.add(uint64(2 * i))
	}
	if n := len(parseWritten(writtenRanges(nil, many.ranges(2*maxWrittenRanges)))); n != maxWrittenRanges {
		t.Fatalf("kept %d ranges, want at most %d", n, maxWrittenRanges)
	}
}

func setOf(vs ...uint64) *revisionSet {
	var s revisionSet
	for _, v := range vs {
		s.add(v)
	}
	return &s
}

// TestRevisionSetMatchesAMap adds revisions out of order, as acknowledgements
// come back, across word boundaries and below the first one seen, and
// checks membership and the ranges against a plain map.
func TestRevisionSetMatchesAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var set revisionSet
		want := map[uint64]bool{}
		base := uint64(1000 + rng.IntN(5000))
		for range rng.IntN(600) {
			// Mostly a dense run with gaps (others' writes), now and then
			// one far below or above.
			v := base + uint64(rng.IntN(700))
			if rng.IntN(50) == 0 {
				v = uint64(rng.IntN(int(base)))
			}
			set.add(v)
			want[v] = true
		}
		lo, hi := uint64(0), base+800
		var wantRanges []revisionRange
		for v := lo; v <= hi; v++ {
			if set.has(v) != want[v] {
				t.Fatalf("round %d: has(%d) = %t, want %t", round, v, !want[v], want[v])
			}
			if !want[v] {
				continue
			}
			if n := len(wantRanges); n > 0 && wantRanges[n-1].last+1 == v {
				wantRanges[n-1].last = v
			} else {
				wantRanges = append(wantRanges, revisionRange{v, v})
			}
		}
		if got := set.ranges(len(wantRanges) + 1); !slices.Equal(got, wantRanges) {
			t.Fatalf("round %d: ranges %v, want %v", round, got, wantRanges)
		}
		if len(wantRanges) > 2 {
			if got := set.ranges(2); !slices.Equal(got, wantRanges[:2]) {
				t.Fatalf("round %d: first 2 ranges %v, want %v", round, got, wantRanges[:2])
			}
		}
	}
}

// TestRevisionSetSize: a million writes a revision apart cost a bit each,
// not 8 bytes.
func TestRevisionSetSize(t *testing.T) {
	var set revisionSet
	for v := uint64(5_000_000); v < 6_000_000; v++ {
		set.add(v)
	}
	if bytes := 8 * cap(set.words); bytes > 1<<18 {
		t.Fatalf("a million revisions take %d bytes, want at most %d", bytes, 1<<18)
	}
	if got := set.ranges(maxWrittenRanges); !slices.Equal(got, []revisionRange{{5_000_000, 5_999_999}}) {
		t.Fatalf("ranges %v", got)
	}
}
