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
// some runs only. Each call is appended to $STUB_GO_LOG.
const stubGo = `#!/usr/bin/env bash
echo "$*" >>"$STUB_GO_LOG"
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

type rig struct {
	t    *testing.T
	dest string
	log  string
	env  []string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	dir := t.TempDir()
	goBin := filepath.Join(dir, "go")
	if err := os.WriteFile(goBin, []byte(stubGo), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, dest: filepath.Join(dir, "k8s"), log: filepath.Join(dir, "go.log")}
	// The stub is both $GO and the first go on PATH, so that no version of the
	// script can reach the real toolchain (and the network) by accident.
	r.env = append(os.Environ(), "GO="+goBin, "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"STUB_GO_LOG="+r.log, "ENVTEST_K8S_VERSION=1.37.2")
	return r
}

// run runs hack/envtest-assets.sh and returns its combined output; it fails the
// test when the script does not exit 0.
func (r *rig) run(extraEnv ...string) string {
	r.t.Helper()
	cmd := exec.Command(filepath.Join(root(), "hack", "envtest-assets.sh"), r.dest)
	cmd.Env = append(append([]string{}, r.env...), extraEnv...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("envtest-assets.sh failed on the cold path: %v\n%s", err, out)
	}
	return string(out)
}

// builds lists the packages the stub go was asked to build, in order.
func (r *rig) builds() []string {
	r.t.Helper()
	data, err := os.ReadFile(r.log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	var pkgs []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if fields := strings.Fields(line); len(fields) > 0 && fields[0] == "build" {
			pkgs = append(pkgs, fields[len(fields)-1])
		}
	}
	return pkgs
}

func (r *rig) mustHave(names ...string) {
	r.t.Helper()
	for _, name := range names {
		if info, err := os.Stat(filepath.Join(r.dest, name)); err != nil || info.Mode()&0o111 == 0 {
			r.t.Errorf("%s is not an executable in %s after the script: %v", name, r.dest, err)
		}
	}
}

func TestEnvtestAssetsColdPathBuildsBothAndSurvivesChattyVersions(t *testing.T) {
	r := newRig(t)
	out := r.run()
	r.mustHave("etcd", "kube-apiserver")
	want := []string{"go.etcd.io/etcd/server/v3", "k8s.io/kubernetes/cmd/kube-apiserver"}
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
	r.run()
	before := len(r.builds())
	r.run()
	if after := len(r.builds()); after != before {
		t.Errorf("the second run built %d more binaries; binaries of the same release must be kept", after-before)
	}
}

func TestEnvtestAssetsReplacesBinariesOfAnotherRelease(t *testing.T) {
	r := newRig(t)
	r.run("ENVTEST_K8S_VERSION=1.36.3")
	out := r.run()
	if !strings.Contains(out, "holds Kubernetes 1.36.3, want 1.37.2") {
		t.Errorf("the script did not say it replaces 1.36.3:\n%s", out)
	}
	if got := len(r.builds()); got != 4 {
		t.Errorf("want etcd and kube-apiserver built twice (4 builds), got %d: %v", got, r.builds())
	}
}

func TestEnvtestAssetsBuildsTheControllerManagerOnRequest(t *testing.T) {
	r := newRig(t)
	r.run()
	r.run("ENVTEST_CONTROLLER_MANAGER=true")
	r.mustHave("etcd", "kube-apiserver", "kube-controller-manager")
	builds := r.builds()
	if len(builds) != 3 || builds[2] != "k8s.io/kubernetes/cmd/kube-controller-manager" {
		t.Errorf("want only kube-controller-manager built on the second run, got %v", builds)
	}
}
