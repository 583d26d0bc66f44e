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

package v1alpha1_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/migration"
)

// The API server fills a field the user leaves out with the schema's
// default (the +kubebuilder:default markers), and the doors that build their
// tuning without the API (the CLI, crdmigrate, a library user of migration)
// take the engine's and the plan's defaults: the two must be one value, or a
// policy and `graduator migrate` would run the same CRD differently.
func TestSchemaDefaultsAreTheEnginesDefaults(t *testing.T) {
	schema := policySchema(t)
	for path, want := range map[string]any{
		"spec.migration.pageSize":       migration.DefaultPageSize,
		"spec.migration.priority":       string(migration.PriorityBackground),
		"spec.migration.writeTo":        string(migration.WriteToObject),
		"spec.migration.engine":         string(graduatorv1alpha1.EngineGraduator),
		"spec.migration.settleDelay":    graduation.DefaultSettleDelay.String(),
		"spec.migration.roundTripProof": string(graduatorv1alpha1.RoundTripProofEvery),
	} {
		node := schemaNode(t, schema, path)
		if node.Default == nil {
			t.Errorf("%s: no default in the schema, %v in the code", path, want)
			continue
		}
		var got any
		if err := json.Unmarshal(node.Default.Raw, &got); err != nil {
			t.Fatalf("%s: the schema's default %s: %v", path, node.Default.Raw, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: default %v in the schema, %v in the code", path, got, want)
		}
	}
}

func policySchema(t *testing.T) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "graduator.io_crdversionpolicies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

func schemaNode(t *testing.T, schema *apiextensionsv1.JSONSchemaProps, path string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	node := schema
	for _, field := range strings.Split(path, ".") {
		next, ok := node.Properties[field]
		if !ok {
			t.Fatalf("%s: the schema has no field %q", path, field)
		}
		node = &next
	}
	return node
}
