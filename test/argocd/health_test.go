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

// Package argocd_test runs the Argo CD health check of CRDVersionPolicy
// (charts/graduator/argocd) in gopher-lua, the Lua interpreter Argo CD
// embeds, over every case of its health_test.yaml: policies the kstatus
// conformance suite (test/kstatus) produced on a real API server, each with
// the health the state it drove the policy into calls for.
package argocd_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/yaml"
)

const (
	chartDir  = "../../charts/graduator/argocd"
	healthDir = chartDir + "/resource_customizations/graduator.io/CRDVersionPolicy"
	// cmKey is the argocd-cm key of the check.
	cmKey = "resource.customizations.health.graduator.io_CRDVersionPolicy"
)

type healthTests struct {
	Tests []struct {
		HealthStatus struct {
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"healthStatus"`
		InputPath string `json:"inputPath"`
	} `json:"tests"`
}

func TestHealthCheck(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(healthDir, "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(healthDir, "health_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tests healthTests
	if err := yaml.UnmarshalStrict(data, &tests); err != nil {
		t.Fatalf("health_test.yaml: %v", err)
	}
	if len(tests.Tests) == 0 {
		t.Fatal("health_test.yaml has no cases")
	}
	seen := map[string]bool{}
	for _, tc := range tests.Tests {
		seen[filepath.Base(tc.InputPath)] = true
		t.Run(strings.TrimSuffix(filepath.Base(tc.InputPath), ".yaml"), func(t *testing.T) {
			input, err := os.ReadFile(filepath.Join(healthDir, tc.InputPath))
			if err != nil {
				t.Fatal(err)
			}
			var obj map[string]any
			if err := yaml.Unmarshal(input, &obj); err != nil {
				t.Fatal(err)
			}
			status, message, err := health(string(script), obj)
			if err != nil {
				t.Fatal(err)
			}
			if status != tc.HealthStatus.Status || message != tc.HealthStatus.Message {
				t.Errorf("health.lua says %s %q, want %s %q", status, message, tc.HealthStatus.Status, tc.HealthStatus.Message)
			}
		})
	}
	// Every test data file is a case: none is left unchecked.
	files, err := filepath.Glob(filepath.Join(healthDir, "testdata", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("%s is not a case of health_test.yaml", f)
		}
	}
}

// TestArgoCDConfigMapSnippet checks that the argocd-cm snippet the chart
// ships carries health.lua unchanged.
func TestArgoCDConfigMapSnippet(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(healthDir, "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(chartDir, "argocd-cm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Kind string            `json:"kind"`
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(data, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Kind != "ConfigMap" {
		t.Fatalf("argocd-cm.yaml is a %q, want a ConfigMap", cm.Kind)
	}
	if got := cm.Data[cmKey]; got != string(script) {
		t.Errorf("argocd-cm.yaml's %s differs from health.lua; copy health.lua into it", cmKey)
	}
}

// health runs the check as Argo CD does: the object as the global obj, with
// the base, table, string and math libraries, and the returned table's
// status and message.
func health(script string, obj map[string]any) (string, string, error) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(script); err != nil {
		return "", "", err
	}
	ret, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("health.lua returned %s, not a table", L.Get(-1).Type())
	}
	return lua.LVAsString(ret.RawGetString("status")), lua.LVAsString(ret.RawGetString("message")), nil
}

// toLua converts a JSON value as Argo CD hands it to Lua: objects and
// arrays as tables (arrays from 1), numbers, strings and booleans as such.
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for i, e := range v {
			t.RawSetInt(i+1, toLua(L, e))
		}
		return t
	case string:
		return lua.LString(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case bool:
		return lua.LBool(v)
	}
	return lua.LNil
}
