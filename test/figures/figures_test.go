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
