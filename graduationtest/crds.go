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

package graduationtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"
)

// LoadCRDs reads the CustomResourceDefinitions of files and directories (a
// directory's .yaml, .yml and .json files, not its subdirectories), in
// multi-document YAML or JSON. Documents of other kinds are skipped; a
// path that holds no CRD is an error.
func LoadCRDs(paths ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, path := range paths {
		files, err := manifestFiles(path)
		if err != nil {
			return nil, err
		}
		found := 0
		for _, file := range files {
			got, err := readCRDs(file)
			if err != nil {
				return nil, err
			}
			found += len(got)
			crds = append(crds, got...)
		}
		if found == 0 {
			return nil, fmt.Errorf("no CustomResourceDefinition in %s", path)
		}
	}
	return crds, nil
}

func manifestFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read CRD manifests: %w", err)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("read CRD manifests: %w", err)
	}
	var files []string
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); !e.IsDir() && slices.Contains([]string{".yaml", ".yml", ".json"}, ext) {
			files = append(files, filepath.Join(path, e.Name()))
		}
	}
	return files, nil
}

func readCRDs(file string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read CRD manifests: %w", err)
	}
	reader := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var crds []*apiextensionsv1.CustomResourceDefinition
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return crds, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", file, err)
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := sigsyaml.Unmarshal(doc, &head); err != nil {
			return nil, fmt.Errorf("decode %s: %w", file, err)
		}
		if head.Kind != "CustomResourceDefinition" || head.APIVersion != apiextensionsv1.SchemeGroupVersion.String() {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := sigsyaml.UnmarshalStrict(doc, crd); err != nil {
			return nil, fmt.Errorf("decode a CustomResourceDefinition of %s: %w", file, err)
		}
		crds = append(crds, crd)
	}
}

// Install applies CRDs as ApplyStage does and fails the test when the API
// server refuses them or does not serve them in time.
func (r *Rehearsal) Install(ctx context.Context, crds ...*apiextensionsv1.CustomResourceDefinition) {
	r.helper()
	r.fatal(r.ApplyStage(ctx, crds...))
}

// InstallFiles is Install of the CRDs of files and directories (LoadCRDs).
func (r *Rehearsal) InstallFiles(ctx context.Context, paths ...string) {
	r.helper()
	crds, err := LoadCRDs(paths...)
	r.fatal(err)
	r.Install(ctx, crds...)
}

// ApplyStageFiles is ApplyStage of the CRDs of files and directories.
func (r *Rehearsal) ApplyStageFiles(ctx context.Context, paths ...string) error {
	crds, err := LoadCRDs(paths...)
	if err != nil {
		return err
	}
	return r.ApplyStage(ctx, crds...)
}

// ApplyStage creates each CRD, or replaces the one of that name with it
// (as kubectl apply of a release's manifest would: the manifest is the
// whole truth of spec), and waits until every served version answers. It
// returns nil when the API server accepted every CRD, or the API server's
// refusal: dropping a version still listed in status.storedVersions reads
// `status.storedVersions[0]: Invalid value: "v1": missing from
// spec.versions`. The CRDs are not changed.
func (r *Rehearsal) ApplyStage(ctx context.Context, crds ...*apiextensionsv1.CustomResourceDefinition) error {
	var refused []string
	for _, crd := range crds {
		if err := r.apply(ctx, crd.DeepCopy()); err != nil {
			refused = append(refused, err.Error())
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("the API server refused the stage: %s", strings.Join(refused, "; "))
	}
	for _, crd := range crds {
		if err := WaitServed(ctx, r.Client, r.Dynamic, crd.Name, r.opts.Timeout); err != nil {
			return err
		}
	}
	return nil
}

func (r *Rehearsal) apply(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	crd.ResourceVersion = ""
	err := r.Client.Create(ctx, crd)
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create CRD %s: %w", crd.Name, err)
		}
		return nil
	}
	var current apiextensionsv1.CustomResourceDefinition
	if err := r.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, &current); err != nil {
		return fmt.Errorf("get CRD %s: %w", crd.Name, err)
	}
	crd.ResourceVersion = current.ResourceVersion
	if err := r.Client.Update(ctx, crd); err != nil {
		return fmt.Errorf("update CRD %s: %w", crd.Name, err)
	}
	return nil
}
