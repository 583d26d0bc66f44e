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

// Package scripts_test runs the project's shell scripts on the path a fresh
// machine takes, with stubs in place of the slow or networked parts.
package scripts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// stubGo is a `go` that cannot download (setup-envtest fails as it does with no
// network) and whose `go build -o OUT PKG` writes a stub binary at OUT. The stub
// prints far more than a pipe holds on --version, so a reader that stops after
// one line kills it with SIGPIPE: what a real etcd does on a cold machine, on
// some runs only. Each call is appended to $STUB_GO_LOG after the name of the
// directory it ran in (the module that builds).
const stubGo = `#!/usr/bin/env bash
echo "$(basename "$PWD") $*" >>"$STUB_GO_LOG"
case "$1" in
run)
  echo "Error: unable to fetch the list of Kubernetes releases: dial tcp: lookup storage.googleapis.com: no such host" >&2
  exit 1 ;;
build)
  out=
  while [ $# -gt 0 ]; do
    if [ "$1" = -o ]; then out=$2; shift; fi
    shift
  done
  name=$(basename "${out%.tmp}")
  cat >"$out" <<EOF
#!/usr/bin/env bash
yes "$name Version: stub" | head -n 20000
EOF
  chmod +x "$out" ;;
*)
  echo "stub go: unexpected: $*" >&2
  exit 3 ;;
esac
`

// rig runs hack/envtest-assets.sh as `make envtest-assets K8S=...` does: one
// directory a release under store.
type rig struct {
	t     *testing.T
	store string
	log   string
	env   []string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	dir := t.TempDir()
	goBin := filepath.Join(dir, "go")
	if err := os.WriteFile(goBin, []byte(stubGo), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, store: filepath.Join(dir, "k8s"), log: filepath.Join(dir, "go.log")}
	// The stub is both $GO and the first go on PATH, so that no version of the
	// script can reach the real toolchain (and the network) by accident.
	r.env = append(os.Environ(), "GO="+goBin, "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"STUB_GO_LOG="+r.log, "ENVTEST_CONTROLLER_MANAGER=false")
	return r
}

// dir is where the binaries of a release go.
func (r *rig) dir(release string) string { return filepath.Join(r.store, release) }

// script runs hack/envtest-assets.sh for a release into dest and returns its
// combined output and error.
func (r *rig) script(release, dest string, extraEnv ...string) (string, error) {
	cmd := exec.Command(filepath.Join(root(), "hack", "envtest-assets.sh"), dest)
	cmd.Env = append(append([]string{}, r.env...), append([]string{"ENVTEST_K8S_VERSION=" + release}, extraEnv...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// run runs the script for a release into its directory; it fails the test
// when the script does not exit 0.
func (r *rig) run(release string, extraEnv ...string) string {
	r.t.Helper()
	out, err := r.script(release, r.dir(release), extraEnv...)
	if err != nil {
		r.t.Fatalf("envtest-assets.sh for %s failed on the cold path: %v\n%s", release, err, out)
	}
	return out
}

// builds lists what the stub go was asked to build, in order, as
// "MODULE-DIR PACKAGE".
func (r *rig) builds() []string {
	r.t.Helper()
	data, err := os.ReadFile(r.log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	var built []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if fields := strings.Fields(line); len(fields) > 1 && fields[1] == "build" {
			built = append(built, fields[0]+" "+fields[len(fields)-1])
		}
	}
	return built
}

func (r *rig) mustHave(dir string, names ...string) {
	r.t.Helper()
	for _, name := range names {
		if info, err := os.Stat(filepath.Join(dir, name)); err != nil || info.Mode()&0o111 == 0 {
			r.t.Errorf("%s is not an executable in %s after the script: %v", name, dir, err)
		}
	}
}

const (
	etcdBuild      = "etcd go.etcd.io/etcd/server/v3"
	apiserver1372  = "kube-apiserver-1.37.2 k8s.io/kubernetes/cmd/kube-apiserver"
	apiserver13014 = "kube-apiserver-1.30.14 k8s.io/kubernetes/cmd/kube-apiserver"
)

func TestEnvtestAssetsColdPathBuildsBothAndSurvivesChattyVersions(t *testing.T) {
	r := newRig(t)
	out := r.run("1.37.2")
	r.mustHave(r.dir("1.37.2"), "etcd", "kube-apiserver")
	want := []string{etcdBuild, apiserver1372}
	if got := r.builds(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("built %v, want %v", got, want)
	}
	for _, line := range []string{
		"setup-envtest cannot download here",
		"no such host",
		"etcd Version: stub\n",
		"kube-apiserver Version: stub\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("the output does not say %q:\n%s", line, out)
		}
	}
	if strings.Count(out, "Version: stub") != 2 {
		t.Errorf("want one version line a binary, got:\n%s", out)
	}
}

func TestEnvtestAssetsWarmPathBuildsNothing(t *testing.T) {
	r := newRig(t)
	r.run("1.37.2")
	before := len(r.builds())
	out := r.run("1.37.2")
	if after := len(r.builds()); after != before {
		t.Errorf("the second run built %d more binaries; binaries of the same release must be kept", after-before)
	}
	if !strings.Contains(out, "Kubernetes 1.37.2 in "+r.dir("1.37.2")+" (cached)") {
		t.Errorf("the second run does not say it used the cache:\n%s", out)
	}
}

func TestEnvtestAssetsKeepsEveryReleaseSideBySide(t *testing.T) {
	r := newRig(t)
	r.run("1.37.2")
	out := r.run("1.30.14")
	r.mustHave(r.dir("1.30.14"), "etcd", "kube-apiserver")
	r.mustHave(r.dir("1.37.2"), "etcd", "kube-apiserver")
	want := []string{etcdBuild, apiserver1372, apiserver13014}
	if got := r.builds(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("built %v, want %v: 1.30.14's kube-apiserver from its own module, etcd taken from 1.37.2", got, want)
	}
	if !strings.Contains(out, "etcd v3.7.0 taken from "+r.dir("1.37.2")) {
		t.Errorf("the script does not say where etcd came from:\n%s", out)
	}
	r.run("1.37.2")
	r.run("1.30.14")
	if got := len(r.builds()); got != len(want) {
		t.Errorf("going back and forth between releases built %d more binaries: %v", got-len(want), r.builds())
	}
}

func TestEnvtestAssetsMovesTheOneReleaseOfTheOldLayout(t *testing.T) {
	r := newRig(t)
	if err := os.MkdirAll(r.store, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if err := os.WriteFile(filepath.Join(r.store, name), []byte("#!/bin/sh\necho "+name+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(r.store, ".release"), []byte("1.37.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := r.run("1.37.2", "ENVTEST_CONTROLLER_MANAGER=true")
	if got := r.builds(); len(got) != 0 {
		t.Errorf("built %v; the binaries of bin/k8s's own release must move, not be built again", got)
	}
	r.mustHave(r.dir("1.37.2"), "etcd", "kube-apiserver", "kube-controller-manager")
	if !strings.Contains(out, "moved Kubernetes 1.37.2") {
		t.Errorf("the script does not say it moved them:\n%s", out)
	}
}

func TestEnvtestAssetsReplacesBinariesOfAnotherRelease(t *testing.T) {
	r := newRig(t)
	dest := filepath.Join(r.store, "mine")
	if out, err := r.script("1.30.14", dest); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	out, err := r.script("1.37.2", dest)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "holds Kubernetes 1.30.14, want 1.37.2") {
		t.Errorf("the script did not say it replaces 1.30.14:\n%s", out)
	}
	want := []string{etcdBuild, apiserver13014, etcdBuild, apiserver1372}
	if got := r.builds(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("built %v, want %v", got, want)
	}
}

func TestEnvtestAssetsNamesTheModuleAReleaseLacks(t *testing.T) {
	r := newRig(t)
	out, err := r.script("1.29.0", r.dir("1.29.0"))
	if err == nil {
		t.Fatalf("the script succeeded for a release no module builds:\n%s", out)
	}
	if !strings.Contains(out, "hack/envtest/new-release.sh 1.29.0") {
		t.Errorf("the failure does not say how to add the release:\n%s", out)
	}
}

func TestEnvtestAssetsBuildsTheControllerManagerOnRequest(t *testing.T) {
	r := newRig(t)
	r.run("1.37.2")
	r.run("1.37.2", "ENVTEST_CONTROLLER_MANAGER=true")
	r.mustHave(r.dir("1.37.2"), "etcd", "kube-apiserver", "kube-controller-manager")
	builds := r.builds()
	if len(builds) != 3 || builds[2] != "kube-apiserver-1.37.2 k8s.io/kubernetes/cmd/kube-controller-manager" {
		t.Errorf("want only kube-controller-manager built on the second run, got %v", builds)
	}
}
