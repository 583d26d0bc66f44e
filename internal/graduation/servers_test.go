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

package graduation_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/apiservers"
	"github.com/graduator/graduator/internal/graduation"
)

var _ = Describe("Every API server checked before the pass and before the prune", func() {
	switched := crd([]string{"v1alpha1", "v1beta1"}, ver{name: "v1alpha1", flags: "s"}, ver{name: "v1beta1", flags: "sS"})
	two := []string{"10.0.0.1:6443", "10.0.0.2:6443"}
	agree := apiservers.Verdict{State: apiservers.Agree, Servers: two, Reason: "every one of 2 API servers serves it"}
	behind := apiservers.Verdict{State: apiservers.Behind, Servers: two, Reason: "API server 10.0.0.2:6443 still serves storage version hash old"}
	unchecked := apiservers.Verdict{State: apiservers.Unchecked, Reason: "the API servers cannot be listed: forbidden"}
	completed := func(servers ...string) graduatorv1alpha1.MigrationStatus {
		return graduatorv1alpha1.MigrationStatus{StorageVersion: "v1beta1", CRDGeneration: 5, Listed: 10, Rewritten: 10,
			StartedAt: ago(time.Minute), CompletedAt: ago(30 * time.Second), APIServers: servers}
	}
	type expect struct {
		action  graduation.Action
		restart bool
		requeue time.Duration
		reason  string
		says    string
	}
	DescribeTable("the next step",
		func(p *graduatorv1alpha1.CRDVersionPolicy, v apiservers.Verdict, agreedFor time.Duration, preflight *graduation.PreflightResult, want expect) {
			in := graduation.Input{CRD: switched, Policy: p, Now: now, StorageSettled: true, APIServers: v, Preflight: preflight}
			if agreedFor > 0 {
				in.AgreedSince = now.Add(-agreedFor)
			}
			step := graduation.Plan(in)
			Expect(step.Action).To(Equal(want.action), "action; Ready says %q", step.Message())
			Expect(step.Restart).To(Equal(want.restart), "restart")
			Expect(step.RequeueAfter).To(Equal(want.requeue), "requeue after")
			Expect(step.Reason()).To(Equal(want.reason))
			Expect(step.Message()).To(ContainSubstring(want.says))
		},
		Entry("a server still serving the old hash holds the pass, whatever the settle delay says",
			policy("v1beta1", storedSince("v1beta1", time.Hour)), behind, time.Duration(0), nil,
			expect{action: graduation.ActionNone, requeue: 2 * time.Second, reason: graduation.ReasonInProgress, says: "10.0.0.2:6443 still serves"}),
		Entry("every server agreeing: a short settle, not the settle delay",
			policy("v1beta1", storedSince("v1beta1", time.Second)), agree, 500*time.Millisecond, nil,
			expect{action: graduation.ActionNone, requeue: 1500 * time.Millisecond, reason: graduation.ReasonInProgress,
				says: "discovery can show the hash a moment before the server writes it"}),
		Entry("every server agreeing for the short settle: the preflight before the first write, 8 s before the settle delay",
			policy("v1beta1", storedSince("v1beta1", 2*time.Second)), agree, graduation.ServersSettle, nil,
			expect{action: graduation.ActionPreflight, reason: graduation.ReasonInProgress}),
		Entry("servers that cannot be asked one by one: the settle delay, and the status says why",
			policy("v1beta1", storedSince("v1beta1", 4*time.Second)), unchecked, time.Duration(0), nil,
			expect{action: graduation.ActionNone, requeue: 6 * time.Second, reason: graduation.ReasonInProgress,
				says: "cannot be listed: forbidden, so the settle delay of 10s after the switch stands for the check"}),
		Entry("the run starts saying how the servers were checked",
			policy("v1beta1", storedSince("v1beta1", time.Minute)), unchecked, time.Duration(0), &graduation.PreflightResult{Passed: true},
			expect{action: graduation.ActionMigrate, restart: true, reason: graduation.ReasonInProgress, says: "migrating objects to v1beta1"}),

		Entry("the prune after a run checked on every server, all still agreeing",
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(completed(two...))), agree, time.Minute, nil,
			expect{action: graduation.ActionPrune, reason: graduation.ReasonInProgress}),
		Entry("no prune while a server is found behind",
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(completed(two...))), behind, time.Duration(0), nil,
			expect{action: graduation.ActionNone, requeue: 2 * time.Second, reason: graduation.ReasonServersBehind, says: "10.0.0.2:6443 still serves"}),
		Entry("no prune while the servers checked before the run cannot be asked again",
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(completed(two...))), unchecked, time.Duration(0), nil,
			expect{action: graduation.ActionNone, requeue: graduation.BlockedRetryInterval, reason: graduation.ReasonServersBehind,
				says: "checked before the run (10.0.0.1:6443, 10.0.0.2:6443) cannot be asked again"}),
		Entry("a server that joined during the run: the run again, not the prune",
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(completed("10.0.0.1:6443"))), agree, time.Minute,
			&graduation.PreflightResult{Passed: true},
			expect{action: graduation.ActionMigrate, restart: true, reason: graduation.ReasonInProgress}),
		Entry("servers not checkable before the run nor now: the settle delay stood for the check, the prune goes on",
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(completed())), unchecked, time.Duration(0), nil,
			expect{action: graduation.ActionPrune, reason: graduation.ReasonInProgress}),
	)

	It("says on the prune's own line that its safety rests on the clock, and the right that would let it check", func() {
		p := policy("v1beta1", storedSince("v1beta1", time.Minute), run(completed()))
		uncounted := apiservers.Verdict{State: apiservers.Unchecked, Remedy: "list on leases in kube-system",
			Reason: "the number of API servers is unknown"}
		step := graduation.Plan(graduation.Input{CRD: switched, Policy: p, Now: now, StorageSettled: true, APIServers: uncounted})
		Expect(step.Action).To(Equal(graduation.ActionPrune))
		pruned := meta.FindStatusCondition(step.Conditions, graduatorv1alpha1.ConditionStoredVersionsPruned)
		Expect(pruned.Message).To(Equal("pruning status.storedVersions [v1alpha1, v1beta1] to [v1beta1]; the API servers were " +
			"not checked; the settle delay of 10s was waited instead (list on leases in kube-system would let them be checked), " +
			"so the prune's safety rests on the clock"))
		Expect(graduation.ServersChecked(uncounted, 10*time.Second)).To(HavePrefix("not checked; the settle delay of 10s was waited instead"),
			"the verdict first, the details after")
		step = graduation.Plan(graduation.Input{CRD: switched, Policy: p, Now: now, StorageSettled: true, APIServers: agree})
		pruned = meta.FindStatusCondition(step.Conditions, graduatorv1alpha1.ConditionStoredVersionsPruned)
		Expect(pruned.Message).NotTo(ContainSubstring("clock"), "checked: nothing to add")
	})

	It("names the server that joined in the Migrated condition of the new run", func() {
		p := policy("v1beta1", storedSince("v1beta1", time.Minute), run(completed("10.0.0.1:6443")))
		step := graduation.Plan(graduation.Input{CRD: switched, Policy: p, Now: now, StorageSettled: true, APIServers: agree,
			AgreedSince: now.Add(-time.Minute), Preflight: &graduation.PreflightResult{Passed: true}})
		migrated := meta.FindStatusCondition(step.Conditions, graduatorv1alpha1.ConditionMigrated)
		Expect(migrated.Message).To(ContainSubstring("API server 10.0.0.2:6443 joined during the last run"))
	})
})
