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

// Package embed_test embeds crdmigrate into a bare controller-runtime
// manager (no Graduator operator, no CRDVersionPolicy) against a real
// kube-apiserver and etcd, and watches it graduate CRDs.
package embed_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graduator/graduator/crdmigrate"
	"github.com/graduator/graduator/graduationtest"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/envtestutil/envsuite"
	"github.com/graduator/graduator/test/pizzaenv"
)

var (
	env       *envtestutil.Env
	rehearsal *graduationtest.Rehearsal
	// audit is the API server's own account of every patch.
	audit *envtestutil.AuditLog
)

func TestEmbed(t *testing.T) {
	envsuite.RunSpecs(t, "crdmigrate embedded in a bare manager (envtest)")
}

var _ = BeforeSuite(func() {
	auditDir := GinkgoT().TempDir()
	env = envsuite.Start(envtestutil.Options{
		AddToScheme: []func(*runtime.Scheme) error{pizzaenv.AddToScheme},
		Configure: func(e *envtest.Environment) (err error) {
			audit, err = envtestutil.EnableAuditLog(e, auditDir)
			return err
		},
	})
	var err error
	rehearsal, err = graduationtest.NewE(env.Environment, graduationtest.Options{
		Scheme: env.Scheme,
		// A Pizza created at v1alpha1 without a status reads back with
		// "status: {}" once a conversion to v1beta1 wrote it out.
		Ignore: []string{"/status"},
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(rehearsal.Close)
})

// startManager runs a plain controller-runtime manager with nothing but
// crdmigrate in it, and stops it when the spec ends.
func startManager(opts crdmigrate.Options) { startManagerAs(env.Config, opts) }

// startManagerAs is startManager with the manager authenticated by cfg.
func startManagerAs(cfg *rest.Config, opts crdmigrate.Options) {
	GinkgoHelper()
	mgr, err := envtestutil.StartManager(cfg, env.Scheme, func(m ctrl.Manager) error { return crdmigrate.Add(m, opts) })
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(mgr.Stop()).To(Succeed()) })
}

func getCRD(ctx context.Context, name string) *apiextensionsv1.CustomResourceDefinition {
	GinkgoHelper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
	return crd
}

func storedVersions(ctx context.Context, name string) func() []string {
	return func() []string { return getCRD(ctx, name).Status.StoredVersions }
}

// crdEvents returns the Events about the CRD.
func crdEvents(ctx context.Context, name string) func() ([]eventsv1.Event, error) {
	return func() ([]eventsv1.Event, error) {
		return envtestutil.EventsAbout(ctx, env.Client, "CustomResourceDefinition", name)
	}
}

func deleteCRD(ctx context.Context, name string) {
	Expect(envtestutil.DeleteCRD(ctx, env.Client, name, time.Minute)).To(Succeed())
}
