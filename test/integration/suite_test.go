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

// Package integration holds envtest suites that run against a real
// kube-apiserver and etcd: the behaviour the API server owns (validation,
// storage, conversion) is asserted there, never with a fake client.
package integration

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/envtestutil/envsuite"
)

var (
	env       *envtestutil.Env
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
)

func TestIntegration(t *testing.T) {
	envsuite.RunSpecs(t, "Integration suite (envtest)")
}

var _ = BeforeSuite(func() {
	env = envsuite.Start(envtestutil.Options{
		OperatorCRDs: true,
		AddToScheme:  []func(*runtime.Scheme) error{graduatorv1alpha1.AddToScheme},
	})
	testEnv, cfg, k8sClient = env.Environment, env.Config, env.Client
})
