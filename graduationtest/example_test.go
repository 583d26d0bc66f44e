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

package graduationtest_test

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graduator/graduator/graduationtest"
)

// A rehearsal of a CRD upgrade in a plain `testing` test: the CRD of the
// last release, objects created at its version, the new release's CRD,
// the graduation, and the proof that every object reads the same at every
// version; then the release after, which drops the old version.
func Example() {
	t := &testing.T{} // in a test, the *testing.T of the test function
	ctx := context.Background()
	env := &envtest.Environment{}
	if _, err := env.Start(); err != nil {
		panic(err)
	}
	defer func() { _ = env.Stop() }()

	r := graduationtest.New(t, env, graduationtest.Options{})
	r.InstallFiles(ctx, "testdata/release-1") // v1 served and stored
	for _, name := range []string{"a", "b", "c"} {
		w := &unstructured.Unstructured{}
		w.SetAPIVersion("example.com/v1")
		w.SetKind("Widget")
		w.SetNamespace("default")
		w.SetName(name)
		r.Create(ctx, w)
	}
	r.InstallFiles(ctx, "testdata/release-2") // v2 added, with a conversion webhook
	snap := r.Snapshot(ctx, "widgets.example.com")
	report := r.Graduate(ctx, "widgets.example.com", "v2")
	fmt.Println(report.Before, "->", report.After)
	r.Verify(ctx, snap)
	if err := r.ApplyStageFiles(ctx, "testdata/release-3"); err != nil { // v1 dropped
		t.Fatalf("release 3 cannot be installed after the graduation: %v", err)
	}
}

// LoadCRDs reads the CRDs of files and directories and skips other kinds,
// so a release's whole manifest can be given.
func ExampleLoadCRDs() {
	crds, err := graduationtest.LoadCRDs("testdata/widgets-v1.yaml")
	if err != nil {
		panic(err)
	}
	for _, crd := range crds {
		fmt.Println(crd.Name, crd.Spec.Versions[0].Name)
	}
	// Output:
	// widgets.example.com v1
}

// Storage says, from etcd, which version each object is stored in; NotAs
// names those left behind.
func ExampleStorage() {
	s := graduationtest.Storage{CRD: "widgets.example.com", Objects: map[string]string{
		"default/a": "example.com/v2", "default/b": "example.com/v1", "default/c": "example.com/v2",
	}}
	fmt.Println(s)
	fmt.Println(s.NotAs("example.com/v2"))
	// Output:
	// widgets.example.com: 3 objects: 1 as example.com/v1, 2 as example.com/v2
	// [default/b]
}
