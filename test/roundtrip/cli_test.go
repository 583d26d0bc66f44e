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
	"encoding/json"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graduator/graduator/internal/cli"
	"github.com/graduator/graduator/internal/roundtrip"
)

var _ = Describe("graduator prove", Ordered, func() {
	var kubeconfig string
	BeforeAll(func() {
		dir, err := os.MkdirTemp("", "prove-cli-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		kubeconfig = filepath.Join(dir, "kubeconfig")
		Expect(env.WriteKubeconfig(envtest.User{Name: "prover", Groups: []string{"system:masters"}}, kubeconfig)).To(Succeed())
	})

	// run runs the command in this process and returns its exit code and
	// output.
	run := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		root := cli.NewRootCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut})
		root.SetArgs(append([]string{"prove", "--kubeconfig", kubeconfig}, args...))
		err := root.Execute()
		GinkgoWriter.Printf("graduator prove %v: %v\n%s%s", args, err, out.String(), errOut.String())
		return cli.ExitCode(err), out.String()
	}

	It("exits 1 on a lossy conversion, 0 once the loss is accepted or on a lossless one, 2 on bad input", func(ctx SpecContext) {
		w := startWebhook(true)
		lossy := newGadgets(ctx, &w)
		lossy.create(ctx, 100, gadgetSpec)
		before := lossy.resourceVersions(ctx)

		code, out := run(lossy.crd.Name, "--to", "v2")
		Expect(code).To(Equal(1))
		// Every gadget is proven: i%33 == 0 for 4 of 100 carry spec.rare.
		Expect(out).To(ContainSubstring("v1 -> v2 -> v1 loses /spec/rare on 4 of 100 Gadgets"))
		Expect(out).To(ContainSubstring("LOST      /spec/rare at v1: 4 of"))

		code, out = run(lossy.crd.Name, "--to", "v2", "--accept-loss", "/spec/rare", "-o", "json")
		Expect(code).To(Equal(0))
		var r roundtrip.Result
		Expect(json.Unmarshal([]byte(out), &r)).To(Succeed())
		Expect(r.Source).To(Equal(roundtrip.SourceWebhook))
		Expect(r.Versions).To(ConsistOf(And(HaveField("Listed", 100), HaveField("Paths", 5),
			HaveField("Accepted", ConsistOf(HaveField("Path", "/spec/rare"))))))

		// The sample, the opt-out: gadget-00000, the first carrier, and
		// gadget-00099, the largest size, carry spec.rare.
		code, out = run(lossy.crd.Name, "--to", "v2", "--sample", "-o", "markdown")
		Expect(code).To(Equal(1))
		Expect(out).To(ContainSubstring("❌ `/spec/rare` at v1: 2 of"))

		// The storage version is the target and nothing else is stored.
		code, out = run(lossy.crd.Name)
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring("nothing to prove"))

		none := newGadgets(ctx, nil)
		none.create(ctx, 20, func(int) map[string]any { return map[string]any{"color": "green"} })
		code, _ = run(none.crd.Name, "--to", "v2")
		Expect(code).To(Equal(0))

		for _, args := range [][]string{
			{"nothere.example.com"},
			{lossy.crd.Name, "--to", "v9"},
			{lossy.crd.Name, "--accept-loss", "spec/rare"},
			{lossy.crd.Name, "-o", "yaml"},
			{lossy.crd.Name, "--no-such-flag"},
			{},
		} {
			code, _ := run(args...)
			Expect(code).To(Equal(2), "graduator prove %v", args)
		}
		Expect(lossy.resourceVersions(ctx)).To(Equal(before), "graduator prove wrote an object")
	})
})
