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

package figures

import (
	"strings"
	"testing"
	"time"
)

// TestReplace: the block's contents give way to the stamp and the table;
// its opening line, the other blocks and the text around stay.
func TestReplace(t *testing.T) {
	doc := strings.Join([]string{
		"# Page", "",
		Begin("BENCH A", "make bench SECTIONS=a"), "", "old a", "", End("BENCH A"), "",
		"between", "",
		Begin("BENCH B", "make b"), "", "old b", "", End("BENCH B"), "",
	}, "\n")
	stamp := Stamp{Commit: "abc1234", Date: time.Date(2026, 11, 28, 14, 0, 0, 0, time.UTC), Command: "bin/bench -sections a",
		Machine: "2 CPUs (GOMAXPROCS 2)"}
	got, err := Replace(doc, "BENCH A", stamp, "| new | a |\n")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(doc, "old a", "Measured at commit abc1234, 2026-11-28 14:00 UTC, by `bin/bench -sections a`, "+
		"on 2 CPUs (GOMAXPROCS 2).\n\n| new | a |", 1)
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := Replace(doc, "BENCH C", stamp, ""); err == nil {
		t.Error("a block the page does not have was written")
	}
	blocks, err := Blocks(got)
	if err != nil || len(blocks) != 2 || blocks[0].Name != "BENCH A" || blocks[1].Name != "BENCH B" {
		t.Errorf("Blocks = %v, %v; want BENCH A and BENCH B", blocks, err)
	}
	if _, err := Blocks(Begin("BENCH D", "make d") + "\nno end\n"); err == nil {
		t.Error("a block without its closing line passed")
	}
}

// TestParseStamp: a stamp String wrote reads back as written; the lines it
// cannot write are refused.
func TestParseStamp(t *testing.T) {
	for _, s := range []Stamp{
		{Commit: "abc1234", Date: time.Date(2026, 11, 28, 14, 7, 0, 0, time.UTC), Command: "bin/bench -sections proof",
			Machine: "2 CPUs (GOMAXPROCS 2), load 3.31 at the start"},
		{Commit: "8b3e047 + local changes", Date: time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC),
			Command: "LIMIT_RECORD=1 go test ./internal/limit", Machine: "a fake clock, seeded"},
	} {
		got, err := ParseStamp(s.String())
		if err != nil || got != s {
			t.Errorf("ParseStamp(%q) = %+v, %v; want %+v", s.String(), got, err, s)
		}
	}
	for _, line := range []string{
		// no time
		"Measured at commit ff93906, 2026-11-27, by `bin/bench -n 3000`, on 2 CPUs, nothing else running.",
		// words after the command's closing quote
		"Measured at commit f8c881b, 2026-11-26 10:00 UTC, by `make bench-scale` (6,000), on 2 CPUs.",
		"Full run of 2026-11-23 06:00 UTC, 2 CPUs, suite pass in 33m41s (commit 7599d4b).",
		"Measured at commit abc1234, 2026-13-01 10:00 UTC, by `make bench`, on 2 CPUs.",
		"Measured at commit HEAD, 2026-11-01 10:00 UTC, by `make bench`, on 2 CPUs.",
	} {
		if s, err := ParseStamp(line); err == nil {
			t.Errorf("ParseStamp(%q) = %+v, want an error", line, s)
		}
	}
}
