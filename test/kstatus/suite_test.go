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

// Package kstatus_test is the conformance suite of the status conventions
// GitOps tools read: it drives CRDVersionPolicies, per-CRD and fleet, through
// each state of a graduation on a real kube-apiserver and etcd (envtest),
// with the operator running as the other suites run it, and asserts what
// kstatus (sigs.k8s.io/cli-utils/pkg/kstatus/status.Compute, as Flux, kpt
// and kapp use it) concludes. It also rehearses a release gated on a
// policy, and writes the policies it produces as the test data of the Argo
// CD health check (go test ./test/kstatus/ -args -update).
package kstatus_test

import (
	"context"
	"flag"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/envtestutil/envsuite"
	"github.com/graduator/graduator/test/pizzaenv"
)

// update rewrites the Argo CD health check's test data from the policies
// this run produces.
var update = flag.Bool("update", false, "write the policies the suite produces as the Argo CD health check's test data")

var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	dyn       dynamic.Interface
	scheme    *runtime.Scheme
)

func TestKStatus(t *testing.T) {
	envsuite.RunSpecs(t, "kstatus conformance suite (operator on envtest)")
}

var _ = BeforeSuite(func() {
	env := envsuite.Start(envtestutil.Options{
		OperatorCRDs: true,
		AddToScheme:  []func(*runtime.Scheme) error{graduatorv1alpha1.AddToScheme, pizzaenv.AddToScheme},
	})
	testEnv, cfg, scheme, k8sClient, dyn = env.Environment, env.Config, env.Scheme, env.Client, env.Dynamic
})

var _ = AfterSuite(func() {
	if *update {
		Expect(writeHealthTests()).To(Succeed())
	}
})

var policies = schema.GroupVersionResource{Group: graduatorv1alpha1.GroupVersion.Group, Version: graduatorv1alpha1.GroupVersion.Version,
	Resource: "crdversionpolicies"}

// startOperator runs the manager as the binary would, as cfg's user (the
// suite's admin when nil), until the spec ends or the returned stop.
func startOperator(user *rest.Config) (stop func()) {
	if user == nil {
		user = cfg
	}
	op, err := envtestutil.StartOperator(rest.CopyConfig(user), scheme)
	Expect(err).NotTo(HaveOccurred())
	stop = func() { Expect(op.Stop()).To(Succeed()) }
	DeferCleanup(stop)
	return stop
}

// read returns the policy as a GitOps tool reads it, and what kstatus makes
// of it.
func read(ctx context.Context, name string) (*unstructured.Unstructured, *status.Result) {
	GinkgoHelper()
	obj, err := dyn.Resource(policies).Get(ctx, name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	res, err := status.Compute(obj)
	Expect(err).NotTo(HaveOccurred())
	return obj, res
}

// reads waits until kstatus reads the policy as want and returns it. A
// policy that reads otherwise when it stops waiting is printed with its
// conditions.
func reads(ctx context.Context, name string, want status.Status, timeout time.Duration) *unstructured.Unstructured {
	GinkgoHelper()
	var obj *unstructured.Unstructured
	Eventually(func(g Gomega) {
		var res *status.Result
		obj, res = read(ctx, name)
		g.Expect(res.Status).To(Equal(want), "kstatus says %q; conditions: %v", res.Message, conditionsOf(obj))
	}).WithContext(ctx).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	return obj
}

// condition returns a condition of an unstructured policy, as type ->
// "Status/Reason: Message".
func condition(obj *unstructured.Unstructured, condType string) map[string]any {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == condType {
			return m
		}
	}
	return nil
}

func conditionsOf(obj *unstructured.Unstructured) []string {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	var out []string
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok {
			out = append(out, m["type"].(string)+"="+m["status"].(string)+"/"+m["reason"].(string))
		}
	}
	return out
}

// expectStalledAsReady checks the convention: Stalled says what Ready says.
func expectStalledAsReady(obj *unstructured.Unstructured, reason string) {
	GinkgoHelper()
	stalled, ready := condition(obj, graduatorv1alpha1.ConditionStalled), condition(obj, graduatorv1alpha1.ConditionReady)
	Expect(stalled).To(HaveKeyWithValue("status", "True"))
	Expect(stalled).To(HaveKeyWithValue("reason", reason))
	Expect(ready).To(HaveKeyWithValue("status", "False"))
	Expect(stalled["reason"]).To(Equal(ready["reason"]))
	Expect(stalled["message"]).To(Equal(ready["message"]))
	Expect(condition(obj, graduatorv1alpha1.ConditionReconciling)).To(HaveKeyWithValue("status", "False"))
}
