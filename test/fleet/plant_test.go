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

package fleet_test

import (
	"context"
	"strings"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/test/envtestutil"
)

// group is the planted CRDs' group: the same CRDs in every cluster, as a
// fleet has them.
const group = "fleet.example"

// version is one version of a planted CRD.
type version struct {
	name                        string
	served, storage, deprecated bool
}

var (
	v1        = version{name: "v1", served: true, storage: true}
	v1Served  = version{name: "v1", served: true}
	v1Depr    = version{name: "v1", served: true, deprecated: true}
	v1DeprSt  = version{name: "v1", served: true, storage: true, deprecated: true}
	v1Unserve = version{name: "v1"}
	v2        = version{name: "v2", served: true, storage: true}
	v2Served  = version{name: "v2", served: true}
)

// newCRD is a CRD of group named <kind lower>s.fleet.example.
func newCRD(kind string, versions ...version) *apiextensionsv1.CustomResourceDefinition {
	plural := strings.ToLower(kind) + "s"
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"},
		},
	}
	for _, v := range versions {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v.name, Served: v.served, Storage: v.storage, Deprecated: v.deprecated,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", XPreserveUnknownFields: ptr.To(true)}},
		})
	}
	return crd
}

// staleCRD is created storing v1, then switched to v2: the API server
// keeps v1 in status.storedVersions. second is v1 as it is after the
// switch (served or not).
func staleCRD(ctx context.Context, c client.Client, kind string, second version) {
	crd := newCRD(kind, v1, v2Served)
	Expect(c.Create(ctx, crd)).To(Succeed())
	// The API server writes the new CRD's status meanwhile: read it again
	// on a conflict.
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return err
		}
		crd.Spec.Versions[0].Served, crd.Spec.Versions[0].Storage = second.served, false
		crd.Spec.Versions[1].Storage = true
		return c.Update(ctx, crd)
	})).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(crd), crd)).To(Succeed())
		g.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1", "v2"}))
	}).Should(Succeed())
}

// webhookCRD converts through Service fleet/service.
func webhookCRD(ctx context.Context, c client.Client, kind, service string) {
	crd := newCRD(kind, v1Served, v2)
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
			ClientConfig: &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{
				Namespace: "fleet", Name: service, Path: ptr.To("/convert"), Port: ptr.To[int32](443)}}}}
	Expect(c.Create(ctx, crd)).To(Succeed())
	Expect(c.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: service},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": service}, Ports: []corev1.ServicePort{{Port: 443}}}})).To(Succeed())
}

// plantCommon plants what every cluster of the fleet holds: a stale stored
// version, a deprecated storage version, a served deprecated version
// without a policy, a conversion webhook whose Service has no endpoints,
// and two healthy CRDs.
func plantCommon(ctx context.Context, env *envtestutil.Env) {
	c := env.Client
	Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}})).To(Succeed())
	staleCRD(ctx, c, "Stale", v1Served)
	Expect(c.Create(ctx, newCRD("OldStorage", v1DeprSt, v2Served))).To(Succeed())
	Expect(c.Create(ctx, newCRD("Deprecated", v1Depr, v2))).To(Succeed())
	webhookCRD(ctx, c, "Webhook", "conv")
	Expect(c.Create(ctx, newCRD("Healthy", v1))).To(Succeed())
	Expect(c.Create(ctx, newCRD("Graduated", v1Served, v2))).To(Succeed())
}

// plantA: the common states, and a stored version that is no longer
// served. plane-a has no CRDVersionPolicy API.
func plantA(ctx context.Context, env *envtestutil.Env) {
	plantCommon(ctx, env)
	staleCRD(ctx, env.Client, "Unserved", v1Unserve)
}

// plantB: the common states, Graduator's policies (one retiring a
// deprecated version, one stalled), a conversion webhook with a ready
// endpoint, and a failed in-tree StorageVersionMigration.
func plantB(ctx context.Context, env *envtestutil.Env) {
	c := env.Client
	plantCommon(ctx, env)

	Expect(c.Create(ctx, newCRD("Retired", v1Depr, v2))).To(Succeed())
	Expect(c.Create(ctx, &graduatorv1alpha1.CRDVersionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "retireds." + group},
		Spec: graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v2",
			Unserve: []graduatorv1alpha1.UnservedVersion{{Version: "v1"}}}})).To(Succeed())

	Expect(c.Create(ctx, newCRD("Stalled", v1Served, v2))).To(Succeed())
	stalled := &graduatorv1alpha1.CRDVersionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "stalleds." + group},
		Spec: graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v2"}}
	Expect(c.Create(ctx, stalled)).To(Succeed())
	stalled.Status.Phase = graduatorv1alpha1.PhaseMigrating
	for _, cond := range []metav1.Condition{
		{Type: graduatorv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Forbidden", Message: "grant list on stalleds"},
		{Type: graduatorv1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: "Forbidden", Message: "grant list on stalleds"},
	} {
		meta.SetStatusCondition(&stalled.Status.Conditions, cond)
	}
	Expect(c.Status().Update(ctx, stalled)).To(Succeed())

	webhookCRD(ctx, c, "WebhookUp", "conv-up")
	Expect(c.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "fleet", Name: "conv-up-1", Labels: map[string]string{discoveryv1.LabelServiceName: "conv-up"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	})).To(Succeed())

	Expect(c.Create(ctx, newCRD("Migrated", v1Served, v2))).To(Succeed())
	svm := &svmv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "migrateds-by-hand"},
		Spec: svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: group, Resource: "migrateds"}}}
	Expect(c.Create(ctx, svm)).To(Succeed())
	meta.SetStatusCondition(&svm.Status.Conditions, metav1.Condition{Type: string(svmv1.MigrationFailed), Status: metav1.ConditionTrue,
		Reason: "MigrationFailed", Message: "an object could not be written"})
	Expect(c.Status().Update(ctx, svm)).To(Succeed())
}
