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

package roundtrip_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graduator/graduator/internal/cli"
)

// valueFields are the spec fields whose values the lossy conversion drops;
// replicas defaults to 1, so a dropped 0 is read back as 1.
var valueFields = map[string]apiextensionsv1.JSONSchemaProps{
	"replicas": {Type: "integer", Default: &apiextensionsv1.JSON{Raw: []byte("1")}},
	"paused":   {Type: "boolean"},
	"tier": {Type: "string", Enum: []apiextensionsv1.JSON{
		{Raw: []byte(`"gold"`)}, {Raw: []byte(`"silver"`)}, {Raw: []byte(`"legacy"`)}}},
}

// valuePopulation is the number of gadgets; one of them holds each value
// the lossy conversion drops.
const valuePopulation = 3000

// rareValues are the gadgets holding a value the lossy conversion drops,
// and that value.
var rareValues = map[string]struct {
	field string
	value any
}{
	"gadget-01000": {"replicas", int64(0)},
	"gadget-02000": {"paused", false},
	"gadget-02999": {"tier", "legacy"},
}

// valueSpec is the spec of gadget i: every gadget carries the same paths,
// and all but three the same values.
func valueSpec(i int) map[string]any {
	spec := map[string]any{"color": "red", "replicas": int64(3), "paused": true, "tier": "gold"}
	if r, ok := rareValues[fmt.Sprintf("gadget-%05d", i)]; ok {
		spec[r.field] = r.value
	}
	return spec
}

// acceptFlags is how the CLI's refusal says to accept the three losses.
const acceptFlags = "accept them with --accept-loss /spec/paused --accept-loss /spec/replicas --accept-loss /spec/tier"

// The losses real conversions have depend on a value, not on a path: one
// object in valuePopulation holds each, every object carries every path.
// Each door refuses them at the default settings before its first write.
var _ = Describe("A conversion that loses a value, not a path", Ordered, func() {
	var f *lossyFixture
	BeforeAll(func(ctx SpecContext) {
		f = newLossyFixture(ctx, valuePopulation, valueSpec, []loss{{path: "/spec/paused", objects: 1},
			{path: "/spec/replicas", objects: 1}, {path: "/spec/tier", objects: 1}}, []string{"--lossy-values"}, valueFields)
	})

	walkDoors(func() *lossyFixture { return f },
		doorRow{proveDoor, func(_ context.Context, f *lossyFixture, words string) {
			for _, p := range f.paths() {
				Expect(words).To(ContainSubstring("LOST      "+p+" at v1: 1 of"), p)
			}
			Expect(words).To(ContainSubstring(acceptFlags))
		}},
		doorRow{managedDoor, func(_ context.Context, _ *lossyFixture, words string) {
			Expect(words).To(ContainSubstring("list the paths in spec.migration.acceptLoss"))
		}},
		doorRow{gitOpsDoor, nil},
		doorRow{migrateDoor, func(_ context.Context, _ *lossyFixture, words string) {
			Expect(words).To(ContainSubstring(acceptFlags))
			Expect(words).NotTo(ContainSubstring("spec.migration.acceptLoss"))
		}},
	)

	It("the same conversion made lossless: prove exits 0, migrate --prune graduates, every value reads back at v1", func(ctx SpecContext) {
		f.expectGraduatesLossless(ctx)
	})
})

// writeKubeconfig writes a kubeconfig of the test environment for the
// CLI, removed when the container ends.
func writeKubeconfig() string {
	GinkgoHelper()
	dir, err := os.MkdirTemp("", "roundtrip-cli-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	Expect(env.WriteKubeconfig(envtest.User{Name: "graduator", Groups: []string{"system:masters"}}, kubeconfig)).To(Succeed())
	return kubeconfig
}

// graduatorCLI runs the CLI in this process with kubeconfig: its exit code,
// its output and the error it exits with.
func graduatorCLI(ctx context.Context, kubeconfig string, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	root := cli.NewRootCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut})
	root.SetArgs(append(append([]string{}, args[0], "--kubeconfig", kubeconfig), args[1:]...))
	err := root.ExecuteContext(ctx)
	GinkgoWriter.Printf("graduator %v: %v\n%s%s", args, err, out.String(), errOut.String())
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	return cli.ExitCode(err), out.String(), msg
}
