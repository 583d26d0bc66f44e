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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/cli"
	"github.com/graduator/graduator/internal/graduation"
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

var lostValuePaths = []string{"/spec/paused", "/spec/replicas", "/spec/tier"}

// The losses real conversions have depend on a value, not on a path: one
// object in valuePopulation holds each, every object carries every path.
// Each door refuses them at the default settings before its first write.
var _ = Describe("A conversion that loses a value, not a path", Ordered, func() {
	var (
		g          gadgets
		lossless   webhookProcess
		before     map[string]string
		kubeconfig string
	)
	BeforeAll(func(ctx SpecContext) {
		lossy := startWebhookWith("--lossy-values")
		lossless = startWebhookWith()
		g = newGadgets(ctx, &lossy, valueFields)
		g.create(ctx, valuePopulation, valueSpec)
		before = g.resourceVersions(ctx)
		kubeconfig = writeKubeconfig()
	})
	graduator := func(ctx context.Context, args ...string) (int, string, string) {
		return graduatorCLI(ctx, kubeconfig, args...)
	}

	// expectNothingWritten: no gadget was written, etcd holds each as v1,
	// and each value reads back at v1 as it was created.
	expectNothingWritten := func(ctx context.Context) {
		GinkgoHelper()
		Expect(g.resourceVersions(ctx)).To(Equal(before), "a gadget was written")
		g.expectStoredAll(ctx, g.group+"/v1")
		expectSpecsAtV1(ctx, g, valuePopulation, valueSpec)
	}

	It("graduator prove exits 1, naming the three paths and the --accept-loss flags that accept them", func(ctx SpecContext) {
		code, out, msg := graduator(ctx, "prove", g.crd.Name, "--to", "v2")
		Expect(code).To(Equal(1))
		for _, p := range lostValuePaths {
			Expect(out).To(ContainSubstring("LOST      "+p+" at v1: 1 of"), p)
		}
		Expect(msg).To(ContainSubstring("accept them with --accept-loss /spec/paused --accept-loss /spec/replicas --accept-loss /spec/tier"))
		expectNothingWritten(ctx)
	})

	It("a managed policy: Blocked ConversionLossy, naming spec.migration.acceptLoss; the storage never switched", func(ctx SpecContext) {
		startOperator()
		createPolicy(ctx, g, graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v2"})
		policy := waitBlockedOnValues(ctx, g)
		Expect(policy.Status.RoundTrip.Source).To(Equal("Webhook"))
		Expect(apimeta.FindStatusCondition(policy.Status.Conditions, graduatorv1alpha1.ConditionReady).Message).
			To(ContainSubstring("list the paths in spec.migration.acceptLoss"))
		crd := g.fresh(ctx)
		Expect(storageVersion(crd)).To(Equal("v1"), "the storage version was switched")
		Expect(crd.Status.StoredVersions).To(Equal([]string{"v1"}))
		expectNothingWritten(ctx)
	})

	It("a GitOps policy, once a release stores v2: Blocked ConversionLossy, nothing rewritten", func(ctx SpecContext) {
		g.switchStorage(ctx)
		startOperator()
		createPolicy(ctx, g, graduatorv1alpha1.CRDVersionPolicySpec{})
		policy := waitBlockedOnValues(ctx, g)
		Expect(policy.Status.RoundTrip.Source).To(Equal("Webhook"))
		Expect(policy.Status.RoundTrip.DryRun).To(BeNumerically(">", 0))
		Consistently(func(g2 Gomega) {
			g2.Expect(g.fresh(ctx).Status.StoredVersions).To(ContainElement("v1"))
		}).WithTimeout(3 * time.Second).Should(Succeed())
		expectNothingWritten(ctx)
	})

	It("graduator migrate --prune exits 1, naming the --accept-loss flags, and writes nothing", func(ctx SpecContext) {
		code, _, msg := graduator(ctx, "migrate", g.crd.Name, "--prune", "--quiet")
		Expect(code).To(Equal(1))
		Expect(msg).To(ContainSubstring(graduation.ReasonConversionLossy))
		for _, p := range lostValuePaths {
			Expect(msg).To(ContainSubstring(p+" on 1 of"), p)
		}
		Expect(msg).To(ContainSubstring("accept them with --accept-loss /spec/paused --accept-loss /spec/replicas --accept-loss /spec/tier"))
		Expect(msg).NotTo(ContainSubstring("spec.migration.acceptLoss"))
		Expect(g.fresh(ctx).Status.StoredVersions).To(ContainElement("v1"))
		expectNothingWritten(ctx)
	})

	It("the same conversion made lossless: prove exits 0, migrate --prune graduates, every value reads back at v1", func(ctx SpecContext) {
		g.convertWith(ctx, lossless)
		code, _, _ := graduator(ctx, "prove", g.crd.Name)
		Expect(code).To(Equal(0))
		code, _, _ = graduator(ctx, "migrate", g.crd.Name, "--prune", "--quiet")
		Expect(code).To(Equal(0))
		Expect(g.fresh(ctx).Status.StoredVersions).To(Equal([]string{"v2"}))
		g.expectStoredAll(ctx, g.group+"/v2")
		expectSpecsAtV1(ctx, g, valuePopulation, valueSpec)
	})
})

// waitBlockedOnValues waits for the policy of g's CRD to be Blocked for
// ConversionLossy, naming the three value paths.
func waitBlockedOnValues(ctx context.Context, g gadgets) *graduatorv1alpha1.CRDVersionPolicy {
	GinkgoHelper()
	var policy *graduatorv1alpha1.CRDVersionPolicy
	Eventually(func(g2 Gomega) {
		policy = getPolicy(ctx, g.crd.Name)
		g2.Expect(policy.Status.Phase).To(Equal(graduatorv1alpha1.PhaseBlocked))
		c := apimeta.FindStatusCondition(policy.Status.Conditions, graduatorv1alpha1.ConditionReady)
		g2.Expect(c).NotTo(BeNil())
		g2.Expect(c.Reason).To(Equal(graduation.ReasonConversionLossy))
		for _, p := range lostValuePaths {
			g2.Expect(c.Message).To(ContainSubstring(p+" on 1 of"), p)
		}
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	Expect(policy.Status.RoundTrip).NotTo(BeNil())
	return policy
}

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
