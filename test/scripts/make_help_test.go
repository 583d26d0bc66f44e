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

package scripts_test

import (
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"
)

// helpWidth is the house's line limit, which `make help` keeps to.
const helpWidth = 98

// TestMakeHelpWidth: every line of `make help` fits the house's width, so a
// target's help is a line and its detail lives in docs/development.md.
func TestMakeHelpWidth(t *testing.T) {
	out, err := exec.Command("make", "-s", "-C", root(), "help").Output()
	if err != nil {
		t.Fatalf("make help: %v", err)
	}
	for line := range strings.Lines(string(out)) {
		line = strings.TrimRight(line, "\n")
		if n := utf8.RuneCountInString(line); n > helpWidth {
			t.Errorf("make help: a line of %d characters (at most %d): %s", n, helpWidth, line)
		}
	}
}
