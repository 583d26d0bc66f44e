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

package image

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The krew manifest `make release-artifacts` writes: every platform
// archive with its checksum, no placeholder left.
func TestTheKrewManifestRenders(t *testing.T) {
	const version = "v0.1.0"
	dist := t.TempDir()
	platforms := []string{"darwin_amd64", "darwin_arm64", "linux_amd64", "linux_arm64"}
	var sums strings.Builder
	for i, p := range platforms {
		fmt.Fprintf(&sums, "%064x  kubectl-graduator_%s_%s.tar.gz\n", i+1, version, p)
	}
	if err := os.WriteFile(filepath.Join(dist, "checksums.txt"), []byte(sums.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root(), "hack", "krew", "render.sh"))
	cmd.Env = append(os.Environ(), "VERSION="+version, "DIST="+dist)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("render.sh: %v", err)
	}
	var plugin struct {
		Kind     string
		Metadata struct{ Name string }
		Spec     struct {
			Version   string
			Platforms []struct {
				Selector struct{ MatchLabels map[string]string } `json:"selector"`
				URI      string                                  `json:"uri"`
				SHA256   string                                  `json:"sha256"`
				Bin      string                                  `json:"bin"`
			}
		}
	}
	if err := yaml.Unmarshal(out, &plugin); err != nil {
		t.Fatalf("the rendered manifest does not parse: %v\n%s", err, out)
	}
	if plugin.Kind != "Plugin" || plugin.Metadata.Name != "graduator" || plugin.Spec.Version != version {
		t.Errorf("kind %q name %q version %q", plugin.Kind, plugin.Metadata.Name, plugin.Spec.Version)
	}
	if len(plugin.Spec.Platforms) != len(platforms) {
		t.Fatalf("%d platforms, want %d", len(plugin.Spec.Platforms), len(platforms))
	}
	for i, p := range plugin.Spec.Platforms {
		name := p.Selector.MatchLabels["os"] + "_" + p.Selector.MatchLabels["arch"]
		archive := fmt.Sprintf("kubectl-graduator_%s_%s.tar.gz", version, name)
		if !strings.HasSuffix(p.URI, "/"+version+"/"+archive) || p.Bin != "kubectl-graduator" {
			t.Errorf("platform %d (%s): uri %q bin %q", i, name, p.URI, p.Bin)
		}
		if !strings.Contains(sums.String(), p.SHA256+"  "+archive) {
			t.Errorf("platform %s: sha256 %q is not the archive's checksum", name, p.SHA256)
		}
	}
}
