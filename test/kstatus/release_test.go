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
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/polling"
	"sigs.k8s.io/cli-utils/pkg/kstatus/polling/event"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/cli-utils/pkg/object"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/test/envtestutil"
)

// apply server-side applies a release's object as a GitOps tool does, the
// release's field manager owning every field it sets.
func apply(ctx context.Context, obj client.Object) error {
	//nolint:staticcheck // the objects are typed manifests; Client.Apply wants apply configurations.
	return k8sClient.Patch(ctx, obj, client.Apply, client.FieldOwner("release"), client.ForceOwnership)
}

// crdManifest is the widget CRD of a release: versions in order, storage
// the named one.
func crdManifest(group, storage string, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	crd := envtestutil.WidgetCRD(group, versions...)
	crd.TypeMeta = metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "CustomResourceDefinition"}
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == storage
	}
	return crd
}

// waitCurrent waits, with kstatus' poller as Flux and kpt wait, until every
// object is Current, and returns the statuses it saw, in order. A Failed
// object ends the wait with its message.
func waitCurrent(ctx context.Context, timeout time.Duration, objs ...object.ObjMetadata) ([]status.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	poller := polling.NewStatusPoller(k8sClient, k8sClient.RESTMapper(), polling.Options{})
	current := map[object.ObjMetadata]bool{}
	var seen []status.Status
	for e := range poller.Poll(ctx, objs, polling.PollOptions{PollInterval: 200 * time.Millisecond}) {
		switch e.Type {
		case event.ErrorEvent:
			return seen, e.Error
		case event.ResourceUpdateEvent:
			if len(seen) == 0 || seen[len(seen)-1] != e.Resource.Status {
				seen = append(seen, e.Resource.Status)
			}
			switch e.Resource.Status {
			case status.FailedStatus:
				return seen, fmt.Errorf("%s is Failed: %s", e.Resource.Identifier.Name, e.Resource.Message)
			case status.CurrentStatus:
				current[e.Resource.Identifier] = true
				if len(current) == len(objs) {
					return seen, nil
				}
			default:
				delete(current, e.Resource.Identifier)
			}
		}
	}
	return seen, fmt.Errorf("not Current after %s: %w", timeout, ctx.Err())
}

var _ = Describe("A release gated on the graduation", func() {
	It("holds the release that drops v1 until the policy is Current; applied before, the API server refuses it", func(ctx SpecContext) {
		const group = "release.kstatus.graduator.io"
		By("release 0: the CRD at v1, with objects stored as v1")
		Expect(apply(ctx, crdManifest(group, "v1", "v1"))).To(Succeed())
		name := "widgets." + group
		DeferCleanup(func(ctx context.Context) {
			Expect(envtestutil.DeleteCRD(ctx, k8sClient, name, time.Minute)).To(Succeed())
		})
		Expect(envtestutil.WaitServed(ctx, k8sClient, dyn, name)).To(Succeed())
		createWidgets(ctx, envtestutil.WidgetResource(group, "v1"), 200)

		By("release 1: the CRD with v1 and v2, storing v2, and a GitOps-mode policy")
		Expect(apply(ctx, crdManifest(group, "v2", "v1", "v2"))).To(Succeed())
		policy := &graduatorv1alpha1.CRDVersionPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: graduatorv1alpha1.GroupVersion.String(), Kind: "CRDVersionPolicy"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       graduatorv1alpha1.CRDVersionPolicySpec{Migration: slowly},
		}
		Expect(apply(ctx, policy)).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, policy))).To(Succeed())
		})

		By("release 2 applied too early is refused: v1 is still in status.storedVersions")
		err := apply(ctx, crdManifest(group, "v2", "v2"))
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		// Kubernetes 1.37's words; older API servers say "must appear in spec.versions".
		Expect(err.Error()).To(And(ContainSubstring(`status.storedVersions[0]: Invalid value: "v1"`),
			ContainSubstring("missing from spec.versions")))

		By("the gate: kstatus' poller waits on the policy until it is Current")
		startOperator(nil)
		seen, err := waitCurrent(ctx, 3*time.Minute, object.ObjMetadata{
			GroupKind: graduatorv1alpha1.GroupVersion.WithKind("CRDVersionPolicy").GroupKind(), Name: name,
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(seen).To(HaveExactElements(status.InProgressStatus, status.CurrentStatus),
			"the poller never saw the policy done before it was")
		var crd apiextensionsv1.CustomResourceDefinition
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, &crd)).To(Succeed())
		Expect(crd.Status.StoredVersions).To(Equal([]string{"v2"}))

		By("release 2 applies cleanly")
		Expect(apply(ctx, crdManifest(group, "v2", "v2"))).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, &crd)).To(Succeed())
		Expect(crd.Spec.Versions).To(HaveLen(1))
		Expect(crd.Spec.Versions[0].Name).To(Equal("v2"))
	})
})
