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

// Package chart renders Graduator's Helm chart (charts/graduator) with the
// helm binary that `make helm` builds, for the tests that check what it
// renders and the envtest suite that installs its RBAC.
package chart

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Root is the repository's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Dir is the chart's directory.
func Dir() string { return filepath.Join(Root(), "charts", "graduator") }

// ErrNoHelm says that helm is not built; `make helm` builds it (and `make
// test` does first).
var ErrNoHelm = errors.New("helm not found: run `make helm` (make test builds it first), or set HELM to a helm v3 binary")

// Helm returns the helm binary: $HELM, else bin/helm.
func Helm() (string, error) {
	path := os.Getenv("HELM")
	if path == "" {
		path = filepath.Join(Root(), "bin", "helm")
	}
	if _, err := os.Stat(path); err != nil {
		return "", ErrNoHelm
	}
	return path, nil
}

// Run runs helm with args and returns its standard output; the error
// carries its standard error.
func Run(args ...string) ([]byte, error) {
	helm, err := Helm()
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helm, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("helm %v: %w: %s", args, err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// Template renders the chart as release in namespace with --set values
// (such as "rbac.migrateGroups={example.com}"), CRDs included, and returns
// its objects.
func Template(release, namespace string, set ...string) ([]*unstructured.Unstructured, error) {
	args := []string{"template", release, Dir(), "--namespace", namespace, "--include-crds"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := Run(args...)
	if err != nil {
		return nil, err
	}
	return Decode(out)
}

// Decode splits a multi-document YAML stream into objects, skipping empty
// documents.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decode the rendered chart: %w", err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// Find returns the object of kind and name among objs, or nil.
func Find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}
