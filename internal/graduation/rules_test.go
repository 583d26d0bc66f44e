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
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
)

var _ = Describe("the rules the operator, the CLI and check share", func() {
	DescribeTable("StatusSubresourceMissing: writes to /status need the subresource",
		func(c *apiextensionsv1.CustomResourceDefinition, version string, writeTo graduatorv1alpha1.WriteTarget, missing bool) {
			Expect(graduation.StatusSubresourceMissing(c, version, writeTo)).To(Equal(missing))
		},
		Entry("Status without the subresource: missing", crd(nil, ver{name: "v1", flags: "sS"}), "v1", graduatorv1alpha1.WriteToStatus, true),
		Entry("Status with the subresource", withStatusSubresource(crd(nil, ver{name: "v1", flags: "sS"}), "v1"), "v1",
			graduatorv1alpha1.WriteToStatus, false),
		Entry("Object never needs it", crd(nil, ver{name: "v1", flags: "sS"}), "v1", graduatorv1alpha1.WriteToObject, false),
		Entry("an empty writeTo is Object", crd(nil, ver{name: "v1", flags: "sS"}), "v1", graduatorv1alpha1.WriteTarget(""), false),
		Entry("a version the CRD does not have is another rule's", crd(nil, ver{name: "v1", flags: "sS"}), "v9",
			graduatorv1alpha1.WriteToStatus, false),
	)

	noWebhook := func(c *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
		c.Spec.Conversion = nil
		return c
	}
	DescribeTable("ConversionMissing: different schemas need a conversion webhook",
		func(c *apiextensionsv1.CustomResourceDefinition, missing bool) {
			Expect(graduation.ConversionMissing(c, &c.Spec.Versions[0], &c.Spec.Versions[1])).To(Equal(missing))
		},
		Entry("different schemas, no webhook: missing", noWebhook(crd(nil, ver{name: "v1", flags: "sS"}, ver{name: "v2", flags: "s"})), true),
		Entry("different schemas, a webhook", crd(nil, ver{name: "v1", flags: "sS"}, ver{name: "v2", flags: "s"}), false),
		Entry("the same schema, no webhook", noWebhook(crd(nil, ver{name: "v1", flags: "sS", schema: "x"}, ver{name: "v2", flags: "s", schema: "x"})), false),
	)
	It("does not judge a version that is not there", func() {
		c := noWebhook(crd(nil, ver{name: "v1", flags: "sS"}))
		Expect(graduation.ConversionMissing(c, &c.Spec.Versions[0], nil)).To(BeFalse())
	})
})
