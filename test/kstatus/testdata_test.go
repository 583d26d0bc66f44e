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

package kstatus_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/test/envtestutil"
)

// healthDir is the Argo CD resource customization of CRDVersionPolicy, in
// Argo CD's layout: health.lua, health_test.yaml, testdata/.
const healthDir = "charts/graduator/argocd/resource_customizations/graduator.io/CRDVersionPolicy"

// Argo CD's health statuses the check returns.
const (
	healthy     = "Healthy"
	progressing = "Progressing"
	degraded    = "Degraded"
	suspended   = "Suspended"
)

// healthCase is one entry of health_test.yaml, Argo CD's format.
type healthCase struct {
	HealthStatus struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	} `json:"healthStatus"`
	InputPath string `json:"inputPath"`
}

type healthTests struct {
	Tests []healthCase `json:"tests"`
}

var (
	recordedMu sync.Mutex
	recorded   = map[string]healthCase{}
)

// record keeps a policy the suite produced as the test data file
// testdata/<name>.yaml, with the Argo CD health the scenario calls for:
// written with -update, when the suite ends.
func record(obj *unstructured.Unstructured, name, health string) {
	GinkgoHelper()
	if !*update {
		return
	}
	obj = obj.DeepCopy()
	unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields")
	unstructured.RemoveNestedField(obj.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(obj.Object, "metadata", "uid")
	data, err := yaml.Marshal(obj.Object)
	Expect(err).NotTo(HaveOccurred())
	root, err := envtestutil.ModuleRoot()
	Expect(err).NotTo(HaveOccurred())
	input := filepath.Join("testdata", name+".yaml")
	Expect(os.WriteFile(filepath.Join(root, healthDir, input), data, 0o644)).To(Succeed())
	c := healthCase{InputPath: input}
	c.HealthStatus.Status, c.HealthStatus.Message = health, healthMessage(obj, health)
	recordedMu.Lock()
	defer recordedMu.Unlock()
	recorded[input] = c
}

// healthMessage is the message the health check gives a policy read as
// health: the words of the condition that decides it.
func healthMessage(obj *unstructured.Unstructured, health string) string {
	text := func(condType string, withReason bool) string {
		c := condition(obj, condType)
		if withReason {
			return fmt.Sprintf("%v: %v", c["reason"], c["message"])
		}
		return fmt.Sprint(c["message"])
	}
	generation := obj.GetGeneration()
	observed, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	paused, _, _ := unstructured.NestedBool(obj.Object, "spec", "paused")
	switch {
	case health == progressing && obj.GetDeletionTimestamp() != nil:
		return "Pending deletion"
	case health == suspended && paused:
		return "spec.paused is true: the graduation waits until it is set to false"
	case health == progressing && observed != generation:
		return fmt.Sprintf("Waiting for the operator to observe generation %d", generation)
	case health == progressing:
		return text(graduatorv1alpha1.ConditionReconciling, true)
	case health == degraded:
		return text(graduatorv1alpha1.ConditionStalled, true)
	case health == suspended:
		return text(graduatorv1alpha1.ConditionStalled, false)
	}
	return text(graduatorv1alpha1.ConditionReady, false)
}

// writeHealthTests merges the cases this run recorded into
// health_test.yaml: a run of some specs only keeps the others' cases.
func writeHealthTests() error {
	root, err := envtestutil.ModuleRoot()
	if err != nil {
		return err
	}
	path := filepath.Join(root, healthDir, "health_test.yaml")
	var tests healthTests
	if data, err := os.ReadFile(path); err == nil {
		if err := yaml.Unmarshal(data, &tests); err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	byInput := map[string]healthCase{}
	for _, c := range tests.Tests {
		byInput[c.InputPath] = c
	}
	recordedMu.Lock()
	for input, c := range recorded {
		byInput[input] = c
	}
	recordedMu.Unlock()
	tests.Tests = tests.Tests[:0]
	for _, c := range byInput {
		tests.Tests = append(tests.Tests, c)
	}
	sort.Slice(tests.Tests, func(i, j int) bool { return tests.Tests[i].InputPath < tests.Tests[j].InputPath })
	data, err := yaml.Marshal(tests)
	if err != nil {
		return err
	}
	header := "# Generated by the kstatus conformance suite from the policies it produced:\n" +
		"# go test ./test/kstatus/ -args -update. Each case is a state the suite drove a policy into.\n"
	return os.WriteFile(path, append([]byte(header), data...), 0o644)
}
