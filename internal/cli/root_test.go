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

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"
)

// run runs the CLI in process, as main does.
func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if err != nil {
		errOut.WriteString("Error: " + err.Error() + "\n")
	}
	return out.String(), errOut.String(), ExitCode(err)
}

// One rule for bad flags and arguments: a usage error exits 1 in every
// command, but in verify and check, where 1 means "differences" and
// "unsafe", bad input of any kind exits 2, as documented.
func TestUsageErrorsExitTheSameInEveryCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"migrate", "widgets.example.com", "--colour"}, ExitUsage, "unknown flag: --colour"},
		{[]string{"migrate"}, ExitUsage, "accepts 1 arg(s)"},
		{[]string{"migrate", "widgets.example.com", "--concurrency", "0"}, ExitUsage, "--concurrency must be at least 1"},
		{[]string{"migrate", "widgets.example.com", "--page-size", "ten"}, ExitUsage, "invalid argument"},
		{[]string{"migrate", "widgets.example.com", "--priority", "turbo"}, ExitUsage, "--priority must be background or full"},
		{[]string{"status", "--colour"}, ExitUsage, "unknown flag: --colour"},
		{[]string{"status", "a", "b"}, ExitUsage, "accepts at most 1 arg(s)"},
		{[]string{"status", "-o", "csv"}, ExitUsage, `unknown output format "csv"`},
		{[]string{"verify", "widgets.example.com", "--colour"}, ExitBadInput, "unknown flag: --colour"},
		{[]string{"verify"}, ExitBadInput, "accepts 1 arg(s)"},
		{[]string{"verify", "widgets.example.com"}, ExitBadInput, "give exactly one of --snapshot FILE"},
		{[]string{"check", "a.yaml", "b.yaml", "--colour"}, ExitBadInput, "unknown flag: --colour"},
		{[]string{"check", "a.yaml"}, ExitBadInput, "needs OLD and NEW"},
		{[]string{"--colour"}, ExitUsage, "unknown flag: --colour"},
	} {
		_, stderr, code := run(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.says) {
			t.Errorf("graduator %s: exit %d, want %d saying %q; stderr:\n%s", strings.Join(tc.args, " "), code, tc.code, tc.says, stderr)
		}
	}
}

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object}
`

const configMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: not-a-crd
`

func TestCheckRefusesASideWithoutAnyCRDUnlessAllowed(t *testing.T) {
	dir := t.TempDir()
	crds, other := filepath.Join(dir, "crds.yaml"), filepath.Join(dir, "configmap.yaml")
	if err := os.WriteFile(crds, []byte(widgetCRD), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte(configMap), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := run(t, "check", crds, other)
	if code != ExitBadInput || !strings.Contains(stderr, "NEW "+other+" holds no CustomResourceDefinition") {
		t.Errorf("NEW without a CRD: exit %d, want 2 saying so:\n%s", code, stderr)
	}
	_, stderr, code = run(t, "check", other, crds)
	if code != ExitBadInput || !strings.Contains(stderr, "OLD "+other+" holds no CustomResourceDefinition") {
		t.Errorf("OLD without a CRD: exit %d, want 2 saying so:\n%s", code, stderr)
	}
	stdout, _, code := run(t, "check", crds, other, "--allow-empty", "-o", "json")
	if code != ExitError || !strings.Contains(stdout, `"rule": "crd-removed"`) {
		t.Errorf("a last release, on purpose: exit %d, want 1 with crd-removed:\n%s", code, stdout)
	}
	if _, _, code := run(t, "check", other, crds, "--allow-empty"); code != 0 {
		t.Errorf("a first release, on purpose: exit %d, want 0", code)
	}
}

// client-go's klog lines (such as "Unexpected error when reading response
// body") stay off the screen unless -v asks for them.
func TestKlogLinesNeedVerbosity(t *testing.T) {
	stderrOf := func(verbosity int, log func()) string {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		saved := os.Stderr
		os.Stderr = w
		if err := setUpLogs(io.Discard, verbosity); err != nil {
			t.Fatal(err)
		}
		log()
		klog.Flush()
		os.Stderr = saved
		_ = w.Close()
		data, _ := io.ReadAll(r)
		return string(data)
	}
	if got := stderrOf(0, func() { klog.ErrorS(nil, "Unexpected error when reading response body") }); got != "" {
		t.Errorf("without -v, klog wrote %q", got)
	}
	if got := stderrOf(4, func() { klog.V(4).InfoS("GET https://example.com") }); !strings.Contains(got, "GET https://example.com") {
		t.Errorf("with -v 4, klog's requests are shown; got %q", got)
	}
	_ = setUpLogs(io.Discard, 0)
}
