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
	"slices"
	"strconv"
	"strings"
)

// maxWrittenRanges bounds Progress.Written: a run whose writes interleave
// with many other clients' keeps the first ranges only, and a resumed
// sweep rewrites the objects of the others again (safe, and no worse than
// not keeping them at all).
const maxWrittenRanges = 512

// revisionRange is a run of consecutive resourceVersions, First..Last.
type revisionRange struct{ first, last uint64 }

// writtenRanges encodes the ranges of a run's own writes (own, in order),
// with those of the run it resumed, as "a-b,c,d-e": consecutive revisions
// collapse, which on a server that mostly serves the migration keeps it
// short.
func writtenRanges(resumed, own []revisionRange) string {
	all := slices.Concat(resumed, own)
	slices.SortFunc(all, func(a, b revisionRange) int { return compareUint(a.first, b.first) })
	var merged []revisionRange
	for _, r := range all {
		if n := len(merged); n > 0 && r.first <= merged[n-1].last+1 {
			merged[n-1].last = max(merged[n-1].last, r.last)
			continue
		}
		merged = append(merged, r)
	}
	if len(merged) > maxWrittenRanges {
		merged = merged[:maxWrittenRanges]
	}
	var b strings.Builder
	for i, r := range merged {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(r.first, 10))
		if r.last != r.first {
			b.WriteByte('-')
			b.WriteString(strconv.FormatUint(r.last, 10))
		}
	}
	return b.String()
}

// revisionSet is the set of resourceVersions a run's own writes were given,
// as a bitmap of the revisions from the first to the last of them: an
// eighth of a byte per revision, whoever wrote it, and an add or a lookup
// in constant time. A slice of the revisions cost 8 bytes an object and had
// to be sorted again for every checkpoint (every page): at 1,000,000
// objects that grew the CLI's peak RSS by tens of MiB.
type revisionSet struct {
	// base is the revision of words[0]'s lowest bit, a multiple of 64.
	base  uint64
	words []uint64
}

// add puts revision v into the set.
func (s *revisionSet) add(v uint64) {
	start := v &^ 63
	switch {
	case len(s.words) == 0:
		s.base = start
	case v < s.base:
		// Writes are acknowledged out of order: an earlier revision than
		// the first one seen grows the bitmap at the front.
		front := make([]uint64, (s.base-start)/64, (s.base-start)/64+uint64(len(s.words)))
		s.words = append(front, s.words...)
		s.base = start
	}
	i := (v - s.base) / 64
	if grow := int(i) + 1 - len(s.words); grow > 0 {
		s.words = append(s.words, make([]uint64, grow)...)
	}
	s.words[i] |= 1 << (v % 64)
}

// has reports whether revision v is in the set.
func (s *revisionSet) has(v uint64) bool {
	if v < s.base {
		return false
	}
	i := (v - s.base) / 64
	return i < uint64(len(s.words)) && s.words[i]&(1<<(v%64)) != 0
}

// ranges returns the set's runs of consecutive revisions in order, the
// first limit of them: a checkpoint keeps no more (maxWrittenRanges), so
// that encoding one costs a pass over the bitmap at most, whole words at a
// time where they are full or empty.
func (s *revisionSet) ranges(limit int) []revisionRange {
	var out []revisionRange
	open := false
	var first uint64
	for i, w := range s.words {
		at := s.base + uint64(i)*64
		if (w == 0 && !open) || (w == ^uint64(0) && open) {
			continue
		}
		for bit := range uint64(64) {
			set := w&(1<<bit) != 0
			switch {
			case set && !open:
				open, first = true, at+bit
			case !set && open:
				open = false
				if out = append(out, revisionRange{first, at + bit - 1}); len(out) == limit {
					return out
				}
			}
		}
	}
	if open {
		out = append(out, revisionRange{first, s.base + uint64(len(s.words))*64 - 1})
	}
	return out
}

// parseWritten decodes writtenRanges' encoding, sorted; what does not
// parse is left out (its objects are then rewritten by the sweep).
func parseWritten(s string) []revisionRange {
	var out []revisionRange
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			continue
		}
		last := first
		if isRange {
			if last, err = strconv.ParseUint(hi, 10, 64); err != nil || last < first {
				continue
			}
		}
		out = append(out, revisionRange{first, last})
	}
	slices.SortFunc(out, func(a, b revisionRange) int { return compareUint(a.first, b.first) })
	return out
}

// inRanges reports whether v is in one of the sorted ranges.
func inRanges(ranges []revisionRange, v uint64) bool {
	i, _ := slices.BinarySearchFunc(ranges, v, func(r revisionRange, v uint64) int {
		switch {
		case r.last < v:
			return -1
		case r.first > v:
			return 1
		}
		return 0
	})
	return i < len(ranges) && ranges[i].first <= v && v <= ranges[i].last
}

func compareUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
