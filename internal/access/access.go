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

// Package access answers one question before a migration writes anything:
// may the caller list, read and patch every object of the resource (and its
// /status for writeTo: Status)? It asks the API server with
// SelfSubjectAccessReviews, so the answer is the authorizer's own, and when
// the answer is no it returns a Denied error that names the RBAC rule to add.
package access

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"github.com/graduator/graduator/migration"
)

// AggregationLabel is the label that adds a ClusterRole's rules to the
// operator's migration ClusterRole (through its aggregationRule).
const AggregationLabel = "graduator.io/aggregate-to-manager"

// Needs lists the permissions a migration of resource needs, in the order
// they are checked, across all namespaces:
//   - list: the engine pages through every object;
//   - get: a refused write (409, 404) is judged by reading the object back,
//     and the managedFields cleanup rereads objects that changed under it;
//   - patch: the no-op writes (and the managedFields cleanup, which always
//     patches the object itself);
//   - patch on /status, for writeTo: Status.
func Needs(resource schema.GroupVersionResource, writeTo migration.WriteTarget) []authorizationv1.ResourceAttributes {
	attr := func(verb, subresource string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{
			Verb: verb, Group: resource.Group, Version: resource.Version, Resource: resource.Resource, Subresource: subresource,
		}
	}
	needs := []authorizationv1.ResourceAttributes{attr("list", ""), attr("get", ""), attr("patch", "")}
	if writeTo == migration.WriteToStatus {
		needs = append(needs, attr("patch", "status"))
	}
	return needs
}

// CheckNeeds asks the API server, one SelfSubjectAccessReview per
// permission, whether the caller holds what a migration of resource takes:
// Needs, and what a caller needs besides (the embedded controller's right
// to write on the CRD, to create Events). It returns nil when it does, a
// *Denied naming every missing permission and the rule to add when it does
// not, and another error when a review could not be made.
func CheckNeeds(ctx context.Context, reviews authorizationv1client.SelfSubjectAccessReviewInterface,
	resource schema.GroupVersionResource, needs []authorizationv1.ResourceAttributes) error {
	missing, err := Missing(ctx, reviews, needs...)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return &Denied{Resource: resource, Missing: missing}
	}
	return nil
}

// Missing asks the API server, one SelfSubjectAccessReview each, whether
// the caller holds the permissions, and returns those it lacks, in order.
// An error means a review could not be made.
func Missing(ctx context.Context, reviews authorizationv1client.SelfSubjectAccessReviewInterface,
	needs ...authorizationv1.ResourceAttributes) ([]authorizationv1.ResourceAttributes, error) {
	var missing []authorizationv1.ResourceAttributes
	for _, attrs := range needs {
		review := &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs},
		}
		got, err := reviews.Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("review access to %s %s: %w", attrs.Verb, Describe(attrs), err)
		}
		if !got.Status.Allowed {
			missing = append(missing, attrs)
		}
	}
	return missing, nil
}

// StorageVersionMigrations is the resource Graduator creates to drive the
// in-tree migrator (engine StorageVersionMigration).
var StorageVersionMigrations = schema.GroupVersionResource{
	Group: "storagemigration.k8s.io", Version: "v1", Resource: "storageversionmigrations",
}

// InTreeNeeds lists what driving the in-tree migrator takes, beside Needs
// (the preflight still reads and dry-run writes objects itself):
//   - create: one StorageVersionMigration per run;
//   - get: its conditions are followed until it Succeeded or Failed;
//   - watch: `graduator status -w` and a user's kubectl follow it too;
//   - delete: a Failed one is never retried by the in-tree migrator, so it is
//     deleted and created again.
func InTreeNeeds() []authorizationv1.ResourceAttributes {
	r := StorageVersionMigrations
	needs := make([]authorizationv1.ResourceAttributes, 0, 4)
	for _, verb := range []string{"create", "get", "watch", "delete"} {
		needs = append(needs, authorizationv1.ResourceAttributes{Verb: verb, Group: r.Group, Version: r.Version, Resource: r.Resource})
	}
	return needs
}

// CheckInTree is CheckNeeds for InTreeNeeds: may the caller drive the in-tree
// migrator? A *Denied names the rule and the chart value that grant it.
func CheckInTree(ctx context.Context, reviews authorizationv1client.SelfSubjectAccessReviewInterface) error {
	missing, err := Missing(ctx, reviews, InTreeNeeds()...)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return &Denied{Resource: StorageVersionMigrations, Missing: missing}
	}
	return nil
}

// Denied is the answer "no": the caller lacks the Missing permissions on
// Resource. It reports itself as a 403 Forbidden API status, so
// apierrors.IsForbidden (and the operator's stall reasons) recognize it.
type Denied struct {
	Resource schema.GroupVersionResource
	Missing  []authorizationv1.ResourceAttributes
}

// IsAdvice marks the denial as advice kept whole in a stall message: the
// rules it names are what a person adds.
func (*Denied) IsAdvice() {}

// Error names what is missing and the rule that grants it, on one line (it
// ends up in a condition message).
func (d *Denied) Error() string {
	missing := d.missing()
	if d.Resource == StorageVersionMigrations {
		return fmt.Sprintf("not allowed to %s, which engine StorageVersionMigration needs; add the rule %s to a ClusterRole "+
			"labelled %s: \"true\" (with the Helm chart: --set inTreeEngine.enabled=true); nothing was changed",
			strings.Join(missing, " and "), d.Rule(), AggregationLabel)
	}
	rules := []string{}
	for _, m := range d.Missing {
		if m.Group == d.Resource.Group {
			continue
		}
		if rule := ruleOf(m); !slices.Contains(rules, rule) {
			rules = append(rules, rule)
		}
	}
	if !d.missesGroup() {
		// Only rights beyond the objects' group: what the caller's own
		// role must grant.
		return fmt.Sprintf("not allowed to %s; grant the rules %s; nothing was changed",
			strings.Join(missing, " and "), strings.Join(rules, " and "))
	}
	also := ""
	if len(rules) > 0 {
		also = ", and grant the rules " + strings.Join(rules, " and ")
	}
	return fmt.Sprintf("not allowed to %s; add the rule %s to a ClusterRole labelled %s: \"true\" "+
		"(with the Helm chart: --set rbac.migrateGroups={%s})%s; nothing was changed",
		strings.Join(missing, " and "), d.Rule(), AggregationLabel, d.Resource.Group, also)
}

// missing names the missing permissions, grouped by resource: "list, get,
// patch widgets.example.com and patch widgets.example.com/status".
func (d *Denied) missing() []string {
	var order []string
	verbs := map[string][]string{}
	for _, m := range d.Missing {
		what := Describe(m)
		if _, seen := verbs[what]; !seen {
			order = append(order, what)
		}
		verbs[what] = append(verbs[what], m.Verb)
	}
	missing := make([]string, 0, len(order))
	for _, what := range order {
		missing = append(missing, strings.Join(verbs[what], ", ")+" "+what)
	}
	return missing
}

// Grant says what is missing and every rule that grants it, for a caller
// that runs under a role of its own (an operator that embeds the
// graduation) rather than Graduator's chart.
func (d *Denied) Grant() string {
	rules := []string{d.Rule()}
	for _, m := range d.Missing {
		if rule := ruleOf(m); m.Group != d.Resource.Group && !slices.Contains(rules, rule) {
			rules = append(rules, rule)
		}
	}
	if !d.missesGroup() {
		rules = rules[1:]
	}
	return fmt.Sprintf("not allowed to %s; grant the manager's ServiceAccount the rules %s; nothing was changed",
		strings.Join(d.missing(), " and "), strings.Join(rules, " and "))
}

// missesGroup reports a missing right on the migrated resource's group.
func (d *Denied) missesGroup() bool {
	for _, m := range d.Missing {
		if m.Group == d.Resource.Group {
			return true
		}
	}
	return false
}

// ruleOf is the ClusterRole rule, in YAML flow style, that grants one
// permission outside the migrated group. Events are patched as well as
// created: a recorder aggregates repeated Events.
func ruleOf(m authorizationv1.ResourceAttributes) string {
	resource := m.Resource
	if m.Subresource != "" {
		resource += "/" + m.Subresource
	}
	verbs := `"` + m.Verb + `"`
	if m.Resource == "events" {
		verbs = `"create", "patch"`
	}
	return fmt.Sprintf(`{apiGroups: ["%s"], resources: ["%s"], verbs: [%s]}`, m.Group, resource, verbs)
}

// Rule is the RBAC rule that grants a migration of the denied resource's
// group, in the flow style of a ClusterRole's rules, ready to paste: get,
// list and patch on every resource of the group ("*" covers /status too).
func (d *Denied) Rule() string {
	if d.Resource == StorageVersionMigrations {
		return InTreeRule
	}
	return RuleFor(d.Resource.Group)
}

// InTreeRule is the rule that lets the operator drive the in-tree migrator.
const InTreeRule = `{apiGroups: ["storagemigration.k8s.io"], resources: ["storageversionmigrations"], ` +
	`verbs: ["create", "get", "watch", "delete"]}`

// RuleFor is the rule that lets the operator migrate every resource of
// group, as one YAML flow-style line.
func RuleFor(group string) string {
	return fmt.Sprintf(`{apiGroups: ["%s"], resources: ["*"], verbs: ["get", "list", "patch"]}`, group)
}

// Status makes Denied an APIStatus with reason Forbidden.
func (d *Denied) Status() metav1.Status {
	return metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: d.Error(),
	}
}

// Describe names the resource of a permission as RBAC and kubectl do:
// "widgets.example.com", "widgets.example.com/status".
func Describe(a authorizationv1.ResourceAttributes) string {
	name := a.Resource
	if a.Group != "" {
		name += "." + a.Group
	}
	if a.Subresource != "" {
		name += "/" + a.Subresource
	}
	return name
}
