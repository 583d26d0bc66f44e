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
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
)

// Every path that can end in a prune keeps the invariant: the moment
// storedVersions stops listing v1, etcd holds no object in v1.
var _ = Describe("A migration whose premise changes mid-run", func() {
	const objects = 300

	// start installs widgets v1 (storage), v2 and v3 with objects at v1, runs
	// an operator, creates a slow policy storing v2, waits until the run is
	// part way, and starts a watcher of prunes.
	start := func(ctx SpecContext, group string) (*apiextensionsv1.CustomResourceDefinition, *graduatorv1alpha1.CRDVersionPolicy, *pruneWatcher, *operator) {
		crd := widgetCRD(group, "v1", "v2", "v3")
		installCRD(ctx, crd)
		createWidgets(ctx, schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}, objects)
		op := startOperatorWith(operatorOptions{})
		DeferCleanup(op.stop)
		policy := slowPolicy(crd.Name, "v2", 50)
		createPolicy(ctx, policy)
		watcher := watchPrunes(ctx, group, crd.Name)
		waitForWrites(op, "widgets", 80)
		return crd, policy, watcher, op
	}

	It("retargeted to another storage version: switches again, migrates everything to it, and prunes only then", func(ctx SpecContext) {
		group := "retarget.test.graduator.io"
		crd, policy, watcher, _ := start(ctx, group)
		Expect(k8sClient.Patch(ctx, policy, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"storageVersion":"v3"}}`)))).To(Succeed())
		Eventually(func() []string { return getCRD(ctx, crd.Name).Status.StoredVersions }).WithTimeout(2 * time.Minute).
			Should(Equal([]string{"v3"}))
		Expect(storedAPIVersions(ctx, group, "widgets")).To(And(HaveLen(objects), HaveEach(group+"/v3")))
		Expect(watcher.stop()).To(BeEmpty(), "storedVersions never lost a version that etcd still held")
	})

	It("on a CRD whose spec changes: restarts the run on the new generation and prunes after a complete one", func(ctx SpecContext) {
		group := "generation.test.graduator.io"
		crd, _, watcher, _ := start(ctx, group)
		live := getCRD(ctx, crd.Name)
		startedOn := live.Generation
		live.Spec.Versions[2].AdditionalPrinterColumns = []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Color", Type: "string", JSONPath: ".spec.color"},
		}
		Expect(k8sClient.Update(ctx, live)).To(Succeed())
		Eventually(func() []string { return getCRD(ctx, crd.Name).Status.StoredVersions }).WithTimeout(2 * time.Minute).
			Should(Equal([]string{"v2"}))
		run := getPolicy(ctx, crd.Name).Status.Migration
		Expect(run.CRDGeneration).To(BeNumerically(">", startedOn), "the run that pruned started on the new generation")
		Expect(run.Failed).To(BeZero())
		Expect(storedAPIVersions(ctx, group, "widgets")).To(And(HaveLen(objects), HaveEach(group+"/v2")))
		Expect(watcher.stop()).To(BeEmpty(), "storedVersions never lost a version that etcd still held")
	})

	It("whose policy is deleted: stops writing, prunes nothing, and a new policy finishes the job", func(ctx SpecContext) {
		group := "deleted.test.graduator.io"
		crd, policy, watcher, op := start(ctx, group)
		Expect(k8sClient.Delete(ctx, policy)).To(Succeed())
		deletedAt := time.Now()
		Eventually(func() int { return len(op.requests.writes("widgets", deletedAt.Add(2*time.Second))) }).
			WithTimeout(5 * time.Second).Should(BeZero())
		Consistently(func() int { return len(op.requests.writes("widgets", deletedAt.Add(2*time.Second))) }).
			WithTimeout(3*time.Second).Should(BeZero(), "no write after the policy is gone")
		Expect(getCRD(ctx, crd.Name).Status.StoredVersions).To(ContainElement("v1"), "nothing pruned")

		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: crd.Name},
			Spec:       graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v2"},
		})
		Eventually(func() []string { return getCRD(ctx, crd.Name).Status.StoredVersions }).WithTimeout(2 * time.Minute).
			Should(Equal([]string{"v2"}))
		Expect(storedAPIVersions(ctx, group, "widgets")).To(And(HaveLen(objects), HaveEach(group+"/v2")))
		Expect(watcher.stop()).To(BeEmpty(), "storedVersions never lost a version that etcd still held")
	})
})

// pruneWatcher polls the CRD every 50 ms; whenever storedVersions lacks a
// version, it counts the objects etcd still holds in that version.
type pruneWatcher struct {
	cancel     context.CancelFunc
	done       chan struct{}
	mu         sync.Mutex
	violations []string
}

func watchPrunes(ctx context.Context, group, crdName string) *pruneWatcher {
	watchCtx, cancel := context.WithCancel(ctx)
	w := &pruneWatcher{cancel: cancel, done: make(chan struct{})}
	DeferCleanup(func() { _ = w.stop() })
	go func() {
		defer GinkgoRecover()
		defer close(w.done)
		for watchCtx.Err() == nil {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := k8sClient.Get(watchCtx, client.ObjectKey{Name: crdName}, &crd); err == nil {
				stored, err := etcd.APIVersions(watchCtx, group, "widgets")
				if err == nil {
					for key, apiVersion := range stored {
						version := apiVersion[len(group)+1:]
						if !slices.Contains(crd.Status.StoredVersions, version) {
							w.mu.Lock()
							w.violations = append(w.violations, fmt.Sprintf("%s stored as %s while storedVersions is %v", key, apiVersion, crd.Status.StoredVersions))
							w.mu.Unlock()
						}
					}
				}
			}
			select {
			case <-watchCtx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return w
}

// stop ends the watch and returns what it saw.
func (w *pruneWatcher) stop() []string {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.violations
}
