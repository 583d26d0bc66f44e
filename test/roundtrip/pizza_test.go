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

package roundtrip_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graduator/graduator/internal/roundtrip"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/gitops"
	"github.com/graduator/graduator/test/pizzaenv"
)

var _ = Describe("The round-trip proof of the Pizza sample", func() {
	It("passes: its conversion keeps what a version cannot hold in an annotation", func(ctx SpecContext) {
		webhook, err := pizzaenv.StartWebhook(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(webhook.Stop)
		apply := func(n int) {
			GinkgoHelper()
			stage, err := pizzaenv.Stage(n)
			Expect(err).NotTo(HaveOccurred())
			webhook.PointConversionAt(stage)
			Expect(gitops.Apply(ctx, env.Client, stage)).To(Succeed())
			Expect(pizzaenv.WaitServed(ctx, env.Client, env.Dynamic, pizzaenv.CRDName)).To(Succeed())
		}
		proveTo := func(target string, source roundtrip.Source) {
			GinkgoHelper()
			crd := &apiextensionsv1.CustomResourceDefinition{}
			Expect(env.Client.Get(ctx, client.ObjectKey{Name: pizzaenv.CRDName}, crd)).To(Succeed())
			r, err := roundtrip.Prove(ctx, env.Dynamic, crd, roundtrip.Options{Target: target})
			Expect(err).NotTo(HaveOccurred())
			GinkgoWriter.Printf("Pizza %s proof: %s\n", r.Source, r.Message())
			Expect(r.Source).To(Equal(source))
			Expect(r.Versions).NotTo(BeEmpty())
			Expect(r.Lossless()).To(BeTrue(), r.Message())
		}

		apply(2) // v1alpha1 stores, v1beta1 served through the webhook
		DeferCleanup(func(ctx SpecContext) {
			Expect(envtestutil.DeleteCRD(ctx, env.Client, pizzaenv.CRDName, 2*time.Minute)).To(Succeed())
		})
		for i := range 100 {
			Expect(env.Client.Create(ctx, pizzaenv.SampleV1alpha1(i))).To(Succeed())
		}
		proveTo("v1beta1", roundtrip.SourceWebhook)

		apply(4) // v1 added; v1alpha1 still stores
		proveTo("v1", roundtrip.SourceWebhook)

		Expect(envtestutil.SetStorageVersion(ctx, env.Client, pizzaenv.CRDName, "v1")).To(Succeed())
		waitStoredAs(ctx, pizzaenv.Resource("v1"), "Pizza", "restaurant.example.com/v1")
		proveTo("v1", roundtrip.SourceWebhook) // and the class sample by dry run
	})
})
