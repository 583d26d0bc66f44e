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

package crdmigrate

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"github.com/graduator/graduator/access"
	"github.com/graduator/graduator/graduation"
	"github.com/graduator/graduator/migration"
)

// accessNeeds is what the operator checks (access.Needs): list, get and
// patch the objects, and patch /status for writeTo: Status.
func accessNeeds(crd *apiextensionsv1.CustomResourceDefinition, version string, writeTo migration.WriteTarget) []authorizationv1.ResourceAttributes {
	return access.Needs(graduation.ResourceAt(crd, version), writeTo)
}

func missingRights(ctx context.Context, reviews authorizationv1client.SelfSubjectAccessReviewInterface,
	needs []authorizationv1.ResourceAttributes) ([]authorizationv1.ResourceAttributes, error) {
	return access.Missing(ctx, reviews, needs...)
}

// Forbidden is the error of a graduation the controller may not carry out:
// its manager lacks the Missing rights. It names the RBAC rules to add, and
// reports itself as a 403 Forbidden API status, so apierrors.IsForbidden
// recognizes it (the Events say Forbidden).
type Forbidden struct {
	Missing []authorizationv1.ResourceAttributes
}

// Error names what is missing and the rules that grant it, on one line.
func (f *Forbidden) Error() string {
	var what, rules []string
	for _, m := range f.Missing {
		what = append(what, m.Verb+" "+access.Describe(m))
		if rule := ruleFor(m); !slices.Contains(rules, rule) {
			rules = append(rules, rule)
		}
	}
	return fmt.Sprintf("not allowed to %s; grant the manager's ServiceAccount the rules %s; nothing was changed",
		strings.Join(what, ", "), strings.Join(rules, " and "))
}

// Status makes Forbidden an APIStatus with reason Forbidden.
func (f *Forbidden) Status() metav1.Status {
	return metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: f.Error(),
	}
}

// ruleFor is the ClusterRole rule that grants a missing right, in YAML flow
// style: the objects' group gets the operator's rule (access.RuleFor), the
// CRD's status and the Events their own.
func ruleFor(m authorizationv1.ResourceAttributes) string {
	switch m.Group {
	case apiextensionsv1.GroupName:
		return `{apiGroups: ["apiextensions.k8s.io"], resources: ["customresourcedefinitions/status"], verbs: ["patch"]}`
	case eventsv1.GroupName:
		return `{apiGroups: ["events.k8s.io"], resources: ["events"], verbs: ["create", "patch"]}`
	}
	return access.RuleFor(m.Group)
}
