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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckLargeFiles: a tracked file over 1 MiB fails the check and is
// named; the same file untracked (ignored, as bin/ is) passes.
func TestCheckLargeFiles(t *testing.T) {
	script := filepath.Join(root(), "hack", "check-large-files.sh")
	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	check := func() (string, error) {
		cmd := exec.Command("bash", script)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(repo, "small.txt"), []byte("small"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "demo"), make([]byte, 1<<20+1), 0o755); err != nil {
		t.Fatal(err)
	}
	git("add", "small.txt")
	if out, err := check(); err != nil {
		t.Fatalf("only small files tracked, the check failed: %v\n%s", err, out)
	}
	git("add", "demo")
	out, err := check()
	if err == nil {
		t.Fatalf("a tracked file of 1 MiB + 1 byte passed the check:\n%s", out)
	}
	if !strings.Contains(out, "demo (1048577 bytes)") {
		t.Fatalf("the check does not name the file:\n%s", out)
	}
}
