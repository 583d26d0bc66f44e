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

package migration_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graduator/graduator/graduationtest"
	"github.com/graduator/graduator/internal/space"
	"github.com/graduator/graduator/migration"
	"github.com/graduator/graduator/test/envtestutil"
)

var _ = Describe("the etcd space budget on etcd's default quota, not told", func() {
	// 1,200 objects of 16 KB add about 24 MiB to etcd: more than the
	// budget a quota not told used to give a small database (a quarter of
	// it, at least 16 MiB), which paced such a run by etcd's compactions
	// (5 minutes apart here, as on a real cluster). Nothing near etcd's
	// 2 GiB.
	const n, notesBytes = 1200, 16 << 10

	It("migrates a population the old rule would have paced without waiting for a compaction", func(ctx SpecContext) {
		quota, err := etcd.Quota(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(quota).To(Equal(migration.DefaultEtcdQuota), "envtest's etcd runs at etcd's default quota")

		f := newFixture(ctx, 0)
		notes := strings.Repeat("n", notesBytes)
		Expect(envtestutil.CreateObjects(ctx, dyn, f.v1, n, 8, func(i int) *unstructured.Unstructured {
			ns, name := key(i)
			return envtestutil.Widget(f.v1, ns, name, map[string]any{"color": "blue", "size": int64(i), "notes": notes})
		})).To(Succeed())
		f.switchStorage(ctx)

		// A wait for a compaction fails the spec at once rather than after
		// the minutes the wait would take.
		runCtx, stop := context.WithCancelCause(ctx)
		defer stop(nil)
		opts := migration.Options{Resource: f.v2, Config: cfg, OnProgress: func(p migration.Progress) {
			if p.CompactionWait != "" {
				stop(errors.New(p.CompactionWait))
			}
		}}
		res, err := migration.Run(runCtx, dyn, opts)
		Expect(context.Cause(runCtx)).NotTo(HaveOccurred(), "the run waited for a compaction (budget: %s)", res.SpaceBudgetReason)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Complete).To(BeTrue())
		Expect(res.Rewritten).To(BeEquivalentTo(n))
		Expect(res.CompactionWaits).To(BeZero())

		By("the budget assumed etcd's default quota, from the database's size the API server reports")
		Expect(res.DatabaseSize).To(BeNumerically(">", 0), "the size is read from the API server's /metrics")
		Expect(res.SpaceBudgetReason).To(ContainSubstring("its quota is not told, so etcd's default 2Gi is assumed"))
		added := int64(n) * space.WriteCost(notesBytes)
		oldBudget := max(res.DatabaseSize/4, 16<<20) // the rule before: a quarter of the database, at least 16 MiB
		Expect(added).To(BeNumerically(">", oldBudget), "the population adds %s, which the old rule (%s) would have paced",
			quantity(added), quantity(oldBudget))
		Expect(res.SpaceBudget).To(BeNumerically(">", added))
		Expect(f.storedCounts(ctx)).To(Equal(map[string]int{f.group + "/v2": n}), "every object is stored as v2")
		AddReportEntry("etcd's default quota, not told", fmt.Sprintf("%d objects of 16 KB (%s): budget %s, no wait",
			n, quantity(added), quantity(res.SpaceBudget)))
	}, SpecTimeout(5*time.Minute))

	It("is told the quota by a rehearsal (graduationtest), which reads it from its own etcd", func(ctx SpecContext) {
		f := newFixture(ctx, 5)
		r := graduationtest.New(GinkgoT(), testEnv, graduationtest.Options{})
		report, err := r.TryGraduate(ctx, f.crd.Name, "v2")
		Expect(err).NotTo(HaveOccurred())
		Expect(report.Migration.SpaceBudgetReason).To(ContainSubstring("of its 2Gi quota"), "the quota is told, not assumed")
	}, SpecTimeout(2*time.Minute))

	It("is told the quota by `graduator migrate` from a kubeadm etcd pod's command line, when the caller may read it", func(ctx SpecContext) {
		// What kubeadm (and kind) run: an etcd static pod in kube-system,
		// here with a lowered quota, as its mirror pod shows it.
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "etcd-control-plane", Namespace: "kube-system",
				Labels: map[string]string{"component": "etcd", "tier": "control-plane"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "registry.k8s.io/etcd:3.6.5-0",
				Command: []string{"etcd", "--data-dir=/var/lib/etcd", "--quota-backend-bytes=201326592"}}}},
		}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, pod))).To(Succeed()) })

		f := newFixture(ctx, 20)
		f.switchStorage(ctx)
		binary, kubeconfig := buildCLI()
		session, err := gexec.Start(exec.Command(binary, "migrate", f.crd.Name, "-o", "json", "--kubeconfig", kubeconfig), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(session).WithTimeout(2 * time.Minute).Should(gexec.Exit(0))
		Expect(string(session.Err.Contents())).To(ContainSubstring("etcd's quota: 192Mi, from the command line of kube-system/etcd-control-plane"))
		var summary struct{ SpaceBudget string }
		Expect(json.Unmarshal(session.Out.Contents(), &summary)).To(Succeed())
		Expect(summary.SpaceBudget).To(ContainSubstring("of its 192Mi quota"))
	}, SpecTimeout(3*time.Minute))
})

func quantity(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }
