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

// Package image checks what a release ships: the OCI image `make image`
// writes to bin/image (its config: entrypoint, user, platform, labels; its
// one layer: the static binaries, no shell; that the extracted manager runs;
// that the Dockerfile describes the same image) and the krew plugin manifest.
package image

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// The parts of the OCI image layout and image spec the test reads.
type (
	descriptor struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
	}
	index struct {
		Manifests []descriptor `json:"manifests"`
	}
	manifest struct {
		MediaType string       `json:"mediaType"`
		Config    descriptor   `json:"config"`
		Layers    []descriptor `json:"layers"`
	}
	imageConfig struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
		Config       struct {
			User       string            `json:"User"`
			Entrypoint []string          `json:"Entrypoint"`
			Cmd        []string          `json:"Cmd"`
			Env        []string          `json:"Env"`
			Labels     map[string]string `json:"Labels"`
		} `json:"config"`
	}
)

type layout struct {
	dir      string
	manifest manifest
	config   imageConfig
}

func openLayout(t *testing.T) *layout {
	t.Helper()
	dir := filepath.Join(root(), "bin", "image")
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		t.Skipf("no image in %s: run `make image` (make test builds it first)", dir)
	}
	l := &layout{dir: dir}
	var idx index
	l.readJSON(t, filepath.Join(dir, "index.json"), &idx)
	if len(idx.Manifests) != 1 {
		t.Fatalf("index.json lists %d manifests, want 1", len(idx.Manifests))
	}
	l.readJSON(t, l.blob(idx.Manifests[0].Digest), &l.manifest)
	l.readJSON(t, l.blob(l.manifest.Config.Digest), &l.config)
	return l
}

func (l *layout) blob(digest string) string {
	return filepath.Join(l.dir, "blobs", strings.Replace(digest, ":", string(filepath.Separator), 1))
}

func (l *layout) readJSON(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
}

// files returns the entries of the image's layers; extract names files to
// write into dir.
func (l *layout) files(t *testing.T, dir string, extract ...string) map[string]*tar.Header {
	t.Helper()
	out := map[string]*tar.Header{}
	for _, layer := range l.manifest.Layers {
		f, err := os.Open(l.blob(layer.Digest))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		gz, err := gzip.NewReader(f)
		if err != nil {
			t.Fatalf("layer %s: %v", layer.Digest, err)
		}
		tr := tar.NewReader(gz)
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			name := "/" + strings.TrimPrefix(hdr.Name, "./")
			out[name] = hdr
			if slices.Contains(extract, name) {
				w, err := os.OpenFile(filepath.Join(dir, filepath.Base(name)), os.O_CREATE|os.O_WRONLY, 0o755)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := io.Copy(w, tr); err != nil {
					t.Fatal(err)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return out
}

func TestTheImageConfig(t *testing.T) {
	l := openLayout(t)
	c := l.config
	if l.manifest.MediaType != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("manifest media type %q, want an OCI manifest", l.manifest.MediaType)
	}
	if c.OS != "linux" || c.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s (make image builds for the host's GOARCH)", c.OS, c.Architecture, runtime.GOARCH)
	}
	if !slices.Equal(c.Config.Entrypoint, []string{"/manager"}) || len(c.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [/manager] and no cmd", c.Config.Entrypoint, c.Config.Cmd)
	}
	if c.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", c.Config.User)
	}
	for _, label := range []string{"org.opencontainers.image.source", "org.opencontainers.image.version", "org.opencontainers.image.revision"} {
		if c.Config.Labels[label] == "" {
			t.Errorf("label %s is missing or empty (labels: %v)", label, c.Config.Labels)
		}
	}
	if got := c.Config.Labels["org.opencontainers.image.revision"]; !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(got) {
		t.Errorf("revision label %q is not a commit", got)
	}
}

func TestTheImageHoldsStaticBinariesAndNoShell(t *testing.T) {
	l := openLayout(t)
	if len(l.manifest.Layers) != 1 {
		t.Errorf("%d layers, want 1 on an empty base", len(l.manifest.Layers))
	}
	dir := t.TempDir()
	files := l.files(t, dir, "/manager")
	var names []string
	for name, hdr := range files {
		names = append(names, name)
		if hdr.Typeflag == tar.TypeReg && hdr.Mode&0o111 == 0 {
			t.Errorf("%s is not executable", name)
		}
	}
	slices.Sort(names)
	if want := []string{"/graduator", "/manager", "/sample-webhook"}; !slices.Equal(names, want) {
		t.Errorf("the image holds %v, want only %v (no shell, no base)", names, want)
	}

	// Static: no program interpreter (dynamic loader) in the ELF header.
	data, err := os.ReadFile(filepath.Join(dir, "manager"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data[:min(len(data), 4096)]), "ld-linux") {
		t.Error("the manager is dynamically linked: build it with CGO_ENABLED=0")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the manager is a linux binary")
	}
	out, err := exec.Command(filepath.Join(dir, "manager"), "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("the extracted manager --help: %v\n%s", err, out)
	}
	for _, flag := range []string{"-leader-elect", "-metrics-bind-address", "-kubeconfig"} {
		if !strings.Contains(string(out), flag) {
			t.Errorf("manager --help does not mention %s:\n%s", flag, out)
		}
	}
}

// The Dockerfile's final stage describes the same image: empty base, the
// same files, user, entrypoint and label keys.
func TestTheDockerfileAgrees(t *testing.T) {
	l := openLayout(t)
	f, err := os.Open(filepath.Join(root(), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var stage []string // the instructions of the last stage
	scanner := bufio.NewScanner(f)
	line := ""
	for scanner.Scan() {
		text := strings.TrimSpace(scanner.Text())
		if strings.HasPrefix(text, "#") || text == "" {
			continue
		}
		line += strings.TrimSuffix(text, `\`) + " "
		if strings.HasSuffix(text, `\`) {
			continue
		}
		if strings.HasPrefix(line, "FROM ") {
			stage = nil
		}
		stage = append(stage, strings.TrimSpace(line))
		line = ""
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"FROM scratch":                             true,
		"USER " + l.config.Config.User:             true,
		fmt.Sprintf("ENTRYPOINT [%q]", "/manager"): true,
	}
	for _, name := range []string{"manager", "graduator", "sample-webhook"} {
		want[fmt.Sprintf("COPY --from=build /out/%s /%s", name, name)] = true
	}
	for instr := range want {
		if !slices.Contains(stage, instr) {
			t.Errorf("the Dockerfile's final stage lacks %q: %q", instr, stage)
		}
	}
	for label := range l.config.Config.Labels {
		if (strings.HasSuffix(label, ".source") || strings.HasSuffix(label, ".version") || strings.HasSuffix(label, ".revision")) &&
			!slices.ContainsFunc(stage, func(s string) bool { return strings.HasPrefix(s, "LABEL") && strings.Contains(s, label+"=") }) {
			t.Errorf("the Dockerfile does not set the label %s", label)
		}
	}
}
