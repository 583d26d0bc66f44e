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

package cli

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graduator/graduator/internal/paging"
)

// crdPageSize is the Limit of each LIST of CRDs. A CRD carries its
// schemas, often hundreds of KiB each, so a page of paging.DefaultPageSize
// could be hundreds of MiB in one response.
const crdPageSize = 100

// listCRDs lists every CRD of the cluster c talks to, crdPageSize at a time
// (paging.Pager: an expired continue token goes on from the one its 410
// carries). It keeps neither managedFields nor annotations (the
// last-applied one repeats the whole manifest), nor the versions' schemas
// unless schemas is set: status and scan without a release read names,
// versions and status only. The typed client reads no discovery, so a
// cluster costs its LISTs and nothing more; ctx carries the cluster's
// timeout. The list is never nil when err is nil: status --watch tells a
// cluster without CRDs from one not listed yet by it.
func listCRDs(ctx context.Context, c apiextensionsclient.Interface, schemas bool) ([]apiextensionsv1.CustomResourceDefinition, error) {
	crds := []apiextensionsv1.CustomResourceDefinition{}
	pager := paging.Pager[*apiextensionsv1.CustomResourceDefinitionList]{
		List: func(ctx context.Context, opts metav1.ListOptions) (*apiextensionsv1.CustomResourceDefinitionList, error) {
			return c.ApiextensionsV1().CustomResourceDefinitions().List(ctx, opts)
		},
		Continue: func(l *apiextensionsv1.CustomResourceDefinitionList) string { return l.Continue },
		PageSize: crdPageSize,
		// Started again from the first page: what was kept would come twice.
		Restart: func(error) error { crds = crds[:0]; return nil },
	}
	err := pager.EachPage(ctx, "", func(l *apiextensionsv1.CustomResourceDefinitionList) error {
		for i := range l.Items {
			crds = append(crds, trimCRD(l.Items[i], schemas))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list CustomResourceDefinitions: %w", err)
	}
	return crds, nil
}

// trimCRD is crd without what no reader of the CLI's listing looks at.
func trimCRD(crd apiextensionsv1.CustomResourceDefinition, schemas bool) apiextensionsv1.CustomResourceDefinition {
	crd.ManagedFields, crd.Annotations = nil, nil
	if !schemas {
		crd.Spec.Versions = append([]apiextensionsv1.CustomResourceDefinitionVersion(nil), crd.Spec.Versions...)
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Schema = nil
		}
	}
	return crd
}
