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
	"fmt"
	"time"

	eventsv1 "k8s.io/api/events/v1"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graduator/graduator/crdmigrate"
	"github.com/graduator/graduator/internal/driver"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/test/envtestutil"
)

// The controller needs no more than the package documentation lists: with
// only what it runs on, it writes nothing and names the rules to add; with
// them added, it graduates the CRD.
var _ = Describe("crdmigrate with least privilege", func() {
	It("names the missing rules in a Forbidden Event, changes nothing, and graduates once they are granted", func(ctx SpecContext) {
		const group, objects = "rbac.embed.test.graduator.io", 20
		crd := envtestutil.WidgetCRD(group, "v1", "v2")
		r := rehearsal.WithT(GinkgoT())
		r.Install(ctx, crd)
		DeferCleanup(deleteCRD, crd.Name)
		Expect(envtestutil.CreateObjects(ctx, env.Dynamic, envtestutil.WidgetResource(group, "v1"), objects, 2, func(i int) *unstructured.Unstructured {
			return envtestutil.Widget(envtestutil.WidgetResource(group, "v1"), "default", fmt.Sprintf("w-%02d", i), map[string]any{"color": "blue"})
		})).To(Succeed())

		const user = "crdmigrate-least-privilege"
		grant(ctx, user+"-runs-on", user, []rbacv1.PolicyRule{
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews"}, Verbs: []string{"create"}},
			{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		})
		authn, err := env.Environment.AddUser(envtest.User{Name: user}, nil)
		Expect(err).NotTo(HaveOccurred())
		startManagerAs(authn.Config(), crdmigrate.Options{Groups: []string{group}, SettleDelay: time.Second})
		Expect(envtestutil.SetStorageVersion(ctx, env.Client, crd.Name, "v2")).To(Succeed())

		Eventually(crdEvents(ctx, crd.Name)).WithTimeout(time.Minute).Should(ContainElement(And(
			HaveField("Reason", graduation.ReasonForbidden), HaveField("Type", "Warning"),
			HaveField("Note", And(
				ContainSubstring("list, get, patch widgets."+group),
				ContainSubstring(`{apiGroups: ["`+group+`"], resources: ["*"], verbs: ["get", "list", "patch"]}`),
				ContainSubstring(`{apiGroups: ["apiextensions.k8s.io"], resources: ["customresourcedefinitions"], verbs: ["patch"]}`),
				ContainSubstring(`{apiGroups: ["apiextensions.k8s.io"], resources: ["customresourcedefinitions/status"], verbs: ["patch"]}`),
				ContainSubstring("nothing was changed"))))))
		By("retrying with the driver's backoff (5 s, 10 s, ...) and telling the stall once")
		forbidden := func() ([]eventsv1.Event, error) {
			events, err := crdEvents(ctx, crd.Name)()
			var out []eventsv1.Event
			for _, e := range events {
				if e.Reason == graduation.ReasonForbidden {
					out = append(out, e)
				}
			}
			return out, err
		}
		Consistently(forbidden).WithTimeout(20*time.Second).WithPolling(2*time.Second).Should(ConsistOf(
			HaveField("Series", BeNil())), "one Forbidden Event, never repeated")
		Expect(getCRD(ctx, crd.Name).Annotations).NotTo(HaveKey(driver.StateAnnotation), "no state was written on the CRD")
		Expect(r.Stored(ctx, crd.Name).Count(group+"/v1")).To(Equal(objects), "no object was written")
		Expect(getCRD(ctx, crd.Name).Status.StoredVersions).To(ConsistOf("v1", "v2"))

		By("granting the rules the Event names")
		grant(ctx, user+"-migrates", user, []rbacv1.PolicyRule{
			{APIGroups: []string{group}, Resources: []string{"*"}, Verbs: []string{"get", "list", "patch"}},
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions", "customresourcedefinitions/status"}, Verbs: []string{"patch"}},
		})
		Eventually(storedVersions(ctx, crd.Name)).WithTimeout(2 * time.Minute).Should(Equal([]string{"v2"}))
		Expect(r.Stored(ctx, crd.Name).NotAs(group + "/v2")).To(BeEmpty())
	})
})

// grant binds a ClusterRole with rules to user, until the spec ends.
func grant(ctx SpecContext, name, user string, rules []rbacv1.PolicyRule) {
	GinkgoHelper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, obj := range []client.Object{role, binding} {
		Expect(env.Client.Create(ctx, obj)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(env.Client.Delete(ctx, obj))).To(Succeed()) })
	}
}
