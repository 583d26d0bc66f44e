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

package cli

import (
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/migration"
)

func TestWritesToStatusNeedAStatusSubresource(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
			{Name: "v1"},
			{Name: "v2", Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}},
		}},
	}
	for _, tc := range []struct {
		version string
		writeTo migration.WriteTarget
		refused bool
	}{
		{"v1", migration.WriteToObject, false},
		{"v1", migration.WriteToStatus, true},
		{"v2", migration.WriteToStatus, false},
		{"v2", migration.WriteToObject, false},
	} {
		err := checkWriteTarget(crd, tc.version, tc.writeTo)
		if refused := err != nil; refused != tc.refused {
			t.Errorf("%s with --write-to %s: refused %v, want %v (%v)", tc.version, tc.writeTo, refused, tc.refused, err)
		}
		if err != nil && !strings.Contains(err.Error(), "version v1 of widgets.example.com has no status subresource") {
			t.Errorf("the refusal does not say why: %v", err)
		}
	}
}

// The flags' tuning goes to the engine as it is: --qps is a float from the
// command line to the engine, with nothing rounded on the way.
func TestQPSReachesTheEngineAsGiven(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	flags := genericclioptions.NewConfigFlags(false)
	server := "https://127.0.0.1:1"
	flags.APIServer = &server
	o := NewMigrateOptions(flags, genericiooptions.NewTestIOStreamsDiscard())
	cmd := newCmdMigrate(o)
	if err := cmd.Flags().Parse([]string{"--qps", "2.5", "--concurrency", "12", "--priority", "full"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Complete([]string{"widgets.example.com"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	d, err := o.driver(nil, nil, graduation.ActionMigrate)
	if err != nil {
		t.Fatal(err)
	}
	if d.Engine == nil {
		t.Fatal("the driver is given no engine options: the policy's would be used")
	}
	if got := *d.Engine; got.QPS != 2.5 || got.Concurrency != 12 || got.Priority != migration.PriorityFull {
		t.Errorf("the engine is given QPS %g, concurrency %d, priority %q; want 2.5, 12, Full", got.QPS, got.Concurrency, got.Priority)
	}
}
