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

package embed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/driver"
	"github.com/graduator/graduator/test/envtestutil"
)

var _ = Describe("crdmigrate in an operator that is SIGKILLed mid-run", func() {
	It("resumes from the checkpoint saved on the CRD: about N writes in all, pruned only at the end", func(ctx SpecContext) {
		const (
			group = "restart.embed.example.com"
			n     = 3000
		)
		crd := envtestutil.WidgetCRD(group, "v1", "v2")
		Expect(env.Client.Create(ctx, crd)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { deleteCRD(ctx, crd.Name) })
		Expect(envtestutil.WaitServed(ctx, env.Client, env.Dynamic, crd.Name)).To(Succeed())
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restart"}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		v1 := envtestutil.WidgetResource(group, "v1")
		Expect(envtestutil.CreateObjects(ctx, env.Dynamic, v1, n, 16, func(i int) *unstructured.Unstructured {
			return envtestutil.Widget(v1, ns.Name, fmt.Sprintf("w-%d", i), map[string]any{"color": "red", "size": int64(i)})
		})).To(Succeed())
		Expect(envtestutil.SetStorageVersion(ctx, env.Client, crd.Name, "v2")).To(Succeed())

		binary, err := gexec.Build("github.com/graduator/graduator/test/embed/embedded")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(gexec.CleanupBuildArtifacts)
		kubeconfig := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(env.WriteKubeconfig(envtest.User{Name: "embedded-operator", Groups: []string{"system:masters"}}, kubeconfig)).To(Succeed())
		start := func() *gexec.Session {
			// A paced run, so that the kill lands in its middle on any machine.
			cmd := exec.Command(binary, "--kubeconfig", kubeconfig, "--crds", crd.Name, "--qps", "400")
			// Gone with the test process, whatever ends it.
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			s, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { s.Kill().Wait(10 * time.Second) })
			return s
		}

		By("running the operator until about a third of the objects are rewritten")
		first := start()
		Eventually(func() int64 { return savedRewritten(ctx, crd.Name) }).WithTimeout(3 * time.Minute).
			WithPolling(50 * time.Millisecond).Should(BeNumerically(">=", n/3))
		first.Signal(syscall.SIGKILL)
		Eventually(first).WithTimeout(10 * time.Second).Should(gexec.Exit())
		saved := savedRewritten(ctx, crd.Name)
		Expect(saved).To(BeNumerically("<", n), "the kill landed after the run")
		Expect(getCRD(ctx, crd.Name).Status.StoredVersions).To(ConsistOf("v1", "v2"), "pruned before the run ended")

		By("starting it again: it resumes and graduates the CRD")
		start()
		Eventually(storedVersions(ctx, crd.Name)).WithTimeout(3 * time.Minute).Should(Equal([]string{"v2"}))
		Expect(rehearsal.WithT(GinkgoT()).Stored(ctx, crd.Name).NotAs(group + "/v2")).To(BeEmpty())

		writes, err := audit.Writes(group, "widgets")
		Expect(err).NotTo(HaveOccurred())
		patched := 0
		for _, w := range writes {
			if w.User == "embedded-operator" && w.Verb == "patch" && !w.DryRun {
				patched++
			}
		}
		GinkgoWriter.Printf("killed at %d of %d rewritten; %d patches in all (%.2f x N)\n", saved, n, patched, float64(patched)/n)
		Expect(patched).To(BeNumerically("<=", n*12/10), "writes in all, a kill at a third included")
	})
})

// savedRewritten is how many objects the state annotation on the CRD says
// the run rewrote: what a restarted operator resumes from.
func savedRewritten(ctx context.Context, name string) int64 {
	raw := getCRD(ctx, name).Annotations[driver.StateAnnotation]
	var status graduatorv1alpha1.CRDVersionPolicyStatus
	if raw == "" || json.Unmarshal([]byte(raw), &status) != nil || status.Migration == nil {
		return 0
	}
	return status.Migration.Rewritten
}
