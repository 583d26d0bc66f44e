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
// envtest control plane, to prove what Graduator's handling of it rests on;
// on an older API server (make test-compat), that engine
// StorageVersionMigration is refused there with the release it needs.
package intree_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/graduationtest"
	"github.com/graduator/graduator/internal/storagemigration"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/envtestutil/envsuite"
	"github.com/graduator/graduator/test/pizzaenv"
)

var (
	k8sClient client.Client
	dyn       dynamic.Interface
	etcd      *graduationtest.EtcdStore
	cfg       *rest.Config
	scheme    *runtime.Scheme
	// audit is kube-apiserver's log of every patch: who wrote which object.
	audit *envtestutil.AuditLog
)

func TestInTree(t *testing.T) {
	envsuite.RunSpecs(t, "In-tree StorageVersionMigration suite (envtest 1.37, kube-controller-manager)")
}

var _ = BeforeSuite(func() {
	auditDir := GinkgoT().TempDir()
	env := envsuite.Start(envtestutil.Options{
		OperatorCRDs: true,
		AddToScheme:  []func(*runtime.Scheme) error{graduatorv1alpha1.AddToScheme, pizzaenv.AddToScheme},
		Configure: func(e *envtest.Environment) (err error) {
			audit, err = envtestutil.EnableAuditLog(e, auditDir)
			return err
		},
	})
	k8sClient, dyn, etcd, cfg, scheme = env.Client, env.Dynamic, env.Etcd, env.Config, env.Scheme

	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	if err := storagemigration.Served(disco); err != nil {
		unserved = storagemigration.Unserved(err)
		Expect(unserved).NotTo(BeNil(), "discovery failed: %v", err)
		GinkgoWriter.Printf("%v: only the specs labelled %q run\n", unserved, olderServer)
		return // the in-tree migrator has nothing to run here
	}

	kcm, err := envtestutil.StartControllerManager(env.Environment, GinkgoWriter, envtestutil.InTreeMigratorControllers...)
	if errors.Is(err, envtestutil.ErrNoControllerManager) {
		Skip(err.Error()) // KUBEBUILDER_ASSETS of the user's without it; `make test` builds it
	}
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(kcm.Stop)
})

// olderServer labels the specs of a server that does not serve
// storagemigration.k8s.io/v1 (before Kubernetes 1.37); every other spec needs
// one that does.
const olderServer = "older-server"

// unserved says why the API server cannot run the in-tree migrator; nil
// when it can.
var unserved *storagemigration.UnservedError

// Each spec runs only where it can, and says why it does not elsewhere.
var _ = BeforeEach(func() {
	forOlder := slices.Contains(CurrentSpecReport().Labels(), olderServer)
	switch {
	case unserved != nil && !forOlder:
		Skip(fmt.Sprintf("needs Kubernetes %s or newer (storagemigration.k8s.io/v1): %v", storagemigration.MinRelease, unserved))
	case unserved == nil && forOlder:
		Skip(fmt.Sprintf("needs a server without storagemigration.k8s.io/v1, before Kubernetes %s: "+
			"`make test-compat K8S=1.30.14` runs it", storagemigration.MinRelease))
	}
})

// startOperator runs Graduator's manager as the suite's admin until the
// spec ends.
func startOperator() {
	op, err := envtestutil.StartOperator(rest.CopyConfig(cfg), scheme)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(op.Stop()).To(Succeed()) })
}
