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

// Package graduation_test runs the operator's manager against a real
// kube-apiserver and etcd (envtest) and the sample Pizza conversion webhook,
// and walks CRDs through their graduation driven by CRDVersionPolicies.
package graduation_test

import (
	"context"
	"net/http"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/graduationtest"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/envtestutil/envsuite"
	"github.com/graduator/graduator/test/pizzaenv"
)

var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	dyn       dynamic.Interface
	etcd      *graduationtest.EtcdStore
	scheme    *runtime.Scheme
)

func TestGraduation(t *testing.T) {
	envsuite.RunSpecs(t, "Graduation suite (operator on envtest)")
}

var _ = BeforeSuite(func() {
	env := envsuite.Start(envtestutil.Options{
		OperatorCRDs: true,
		AddToScheme:  []func(*runtime.Scheme) error{graduatorv1alpha1.AddToScheme, pizzaenv.AddToScheme},
	})
	testEnv, cfg, scheme, k8sClient, dyn, etcd = env.Environment, env.Config, env.Scheme, env.Client, env.Dynamic, env.Etcd
})

// operator is a running manager with Graduator's controllers.
type operator struct {
	stopManager func() error
	// requests records every request the operator sent, in order.
	requests *requestLog
}

// startOperator runs the manager as the binary would, as the suite's admin.
func startOperator() *operator { return startOperatorWith(operatorOptions{}) }

// stop stops the manager the way SIGTERM does and waits until it returned;
// it may be called again.
func (o *operator) stop() {
	Expect(o.stopManager()).To(Succeed())
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// storedAPIVersions reads etcd directly: the apiVersion every object of the
// resource is encoded in, which the API cannot show (it converts).
func storedAPIVersions(ctx context.Context, group, plural string) []string {
	byObject, err := etcd.APIVersions(ctx, group, plural)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	out := make([]string, 0, len(byObject))
	for _, v := range byObject {
		out = append(out, v)
	}
	return out
}
