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

// writtenRanges encodes the sorted resourceVersions of a run's writes, with
// those of the run it resumed, as "a-b,c,d-e": consecutive revisions
// collapse, which on a server that mostly serves the migration keeps it
// short.
func writtenRanges(resumed []revisionRange, sorted []uint64) string {
	all := slices.Clone(resumed)
	for _, v := range sorted {
		all = append(all, revisionRange{v, v})
	}
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
