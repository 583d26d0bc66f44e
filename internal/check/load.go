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

package check

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// ErrBadInput marks input that cannot be checked: an unreadable file, a
// document that is not YAML or JSON, a CRD the API server would refuse.
var ErrBadInput = errors.New("bad input")

// Cluster is the source name for the live CRDs.
const Cluster = "cluster"

// Source reads the CRDs of one side of a comparison.
type Source struct {
	// Stdin is read for "-".
	Stdin io.Reader
	// Live lists the cluster's CRDs, for "cluster".
	Live func(context.Context) ([]apiextensionsv1.CustomResourceDefinition, error)
}

// Load reads the CRDs named by arg: a file (one or many YAML or JSON
// documents; documents that are not CRDs are ignored), a directory (every
// .yaml, .yml and .json file below it), "-" for stdin, or "cluster". CRDs are
// keyed by name.
func (s Source) Load(ctx context.Context, arg string) (map[string]*apiextensionsv1.CustomResourceDefinition, error) {
	switch arg {
	case Cluster:
		if s.Live == nil {
			return nil, fmt.Errorf("%w: no cluster to read", ErrBadInput)
		}
		live, err := s.Live(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the cluster's CRDs: %w", err)
		}
		out := map[string]*apiextensionsv1.CustomResourceDefinition{}
		for i := range live {
			out[live[i].Name] = &live[i]
		}
		return out, nil
	case "-":
		data, err := io.ReadAll(s.Stdin)
		if err != nil {
			return nil, fmt.Errorf("%w: read stdin: %v", ErrBadInput, err)
		}
		return Parse("stdin", data)
	}
	info, err := os.Stat(arg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	if !info.IsDir() {
		data, err := os.ReadFile(arg)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadInput, err)
		}
		return Parse(arg, data)
	}
	var files []string
	err = filepath.WalkDir(arg, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := strings.ToLower(filepath.Ext(path)); !d.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	sort.Strings(files)
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadInput, err)
		}
		crds, err := Parse(file, data)
		if err != nil {
			return nil, err
		}
		for name, crd := range crds {
			if _, dup := out[name]; dup {
				return nil, fmt.Errorf("%w: %s: CRD %s is defined twice", ErrBadInput, file, name)
			}
			out[name] = crd
		}
	}
	return out, nil
}

// Parse reads the CRDs of a multi-document YAML or JSON stream, such as the
// output of kustomize build or helm template.
func Parse(origin string, data []byte) (map[string]*apiextensionsv1.CustomResourceDefinition, error) {
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for doc := 1; ; doc++ {
		var obj map[string]any
		if err := decoder.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%w: %s: document %d is not YAML or JSON: %v", ErrBadInput, origin, doc, err)
		}
		u := unstructured.Unstructured{Object: obj}
		if obj == nil || u.GetKind() != "CustomResourceDefinition" || u.GroupVersionKind().Group != apiextensionsv1.GroupName {
			continue
		}
		if u.GroupVersionKind().Version != "v1" {
			return nil, fmt.Errorf("%w: %s: document %d is %s: only apiextensions.k8s.io/v1 CRDs are supported", ErrBadInput, origin, doc, u.GetAPIVersion())
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj, crd, true); err != nil {
			return nil, fmt.Errorf("%w: %s: document %d (%s): %v", ErrBadInput, origin, doc, u.GetName(), err)
		}
		if err := validate(crd); err != nil {
			return nil, fmt.Errorf("%w: %s: CRD %s: %v", ErrBadInput, origin, crd.Name, err)
		}
		if _, dup := out[crd.Name]; dup {
			return nil, fmt.Errorf("%w: %s: CRD %s is defined twice", ErrBadInput, origin, crd.Name)
		}
		out[crd.Name] = crd
	}
}

// validate refuses what the API server would refuse and the rules cannot
// judge: a CRD without versions, names, or exactly one storage version.
func validate(crd *apiextensionsv1.CustomResourceDefinition) error {
	switch {
	case crd.Name == "":
		return errors.New("metadata.name is missing")
	case crd.Spec.Group == "" || crd.Spec.Names.Plural == "":
		return errors.New("spec.group and spec.names.plural are required")
	case crd.Name != crd.Spec.Names.Plural+"."+crd.Spec.Group:
		return fmt.Errorf("metadata.name must be %s.%s", crd.Spec.Names.Plural, crd.Spec.Group)
	case len(crd.Spec.Versions) == 0:
		return errors.New("spec.versions is missing: a CRD needs at least one version")
	}
	storage := 0
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			storage++
		}
	}
	if storage != 1 {
		return fmt.Errorf("spec.versions must have exactly one storage version, found %d", storage)
	}
	// Then everything else the API server checks on create: schemas are
	// structural, defaults pruned, CEL rules compile, and so on. A manifest
	// has no status; the API server would record the storage version.
	c := crd.DeepCopy()
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(c)
	for _, v := range c.Spec.Versions {
		if v.Storage {
			c.Status = apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{v.Name}}
		}
	}
	var internal apiextensions.CustomResourceDefinition
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(c, &internal, nil); err != nil {
		return err
	}
	if errs := apiextensionsvalidation.ValidateCustomResourceDefinition(context.Background(), &internal); len(errs) > 0 {
		return fmt.Errorf("the API server would refuse it: %w", errs.ToAggregate())
	}
	return nil
}
