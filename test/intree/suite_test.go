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

// Package intree_test runs Kubernetes 1.37's in-tree storage version migrator
// (kube-controller-manager's storage-version-migrator-controller) beside the
// envtest control plane, to prove what Graduator's handling of it rests on.
package intree_test

import (
	"errors"
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graduator/graduator/test/envtestutil"
)

var (
	testEnv   *envtest.Environment
	k8sClient client.Client
	dyn       dynamic.Interface
	etcd      *envtestutil.EtcdStore
)

func TestInTree(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "In-tree StorageVersionMigration suite (envtest 1.37, kube-controller-manager)")
}

var _ = BeforeSuite(func() {
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(),
		"KUBEBUILDER_ASSETS must point at the envtest binaries; run the suite with `make test`")
	testEnv = &envtest.Environment{}
	DeferCleanup(func() { Expect(testEnv.Stop()).To(Succeed()) })
	cfg, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred())

	kcm, err := envtestutil.StartControllerManager(testEnv, GinkgoWriter, envtestutil.InTreeMigratorControllers...)
	if errors.Is(err, envtestutil.ErrNoControllerManager) {
		Skip(err.Error()) // KUBEBUILDER_ASSETS of the user's without it; `make test` builds it
	}
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(kcm.Stop)

	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	dyn, err = dynamic.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	etcd, err = envtestutil.NewEtcdStore(testEnv.ControlPlane.Etcd.URL.String())
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(etcd.Close)
})
