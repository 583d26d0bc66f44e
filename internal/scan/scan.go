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

// Package scan holds the rules of `graduator scan`: what, in one cluster's
// CRDs, the next upgrade will trip on. The rules are pure functions of what
// the CLI read (Cluster); reading is the CLI's job, and nothing here writes.
package scan

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/graduator/graduator/internal/check"
	"github.com/graduator/graduator/internal/graduation"
)

// Severity is how much a finding matters; --fail-on compares against it.
type Severity string

const (
	// Error: the next upgrade (or every read at another version) fails.
	Error Severity = "error"
	// Warning: nothing fails yet, but something must be done before a
	// release can drop a version.
	Warning Severity = "warning"
	// Info: what the scan could not check, and why.
	Info Severity = "info"
)

// rank orders severities; an unknown one ranks below Info.
var rank = map[Severity]int{Info: 1, Warning: 2, Error: 3}

// AtLeast reports whether s is at or above threshold.
func (s Severity) AtLeast(threshold Severity) bool { return rank[s] >= rank[threshold] }

// ParseSeverity reads a --fail-on value.
func ParseSeverity(s string) (Severity, error) {
	if _, ok := rank[Severity(s)]; !ok {
		return "", fmt.Errorf("unknown severity %q: use error, warning or info", s)
	}
	return Severity(s), nil
}

// Rule names. The JSON output carries them: a contract.
const (
	RuleStaleStoredVersions      = "stale-stored-versions"
	RuleStoredNotServed          = "stored-version-not-served"
	RuleStorageNotServed         = "storage-version-not-served"
	RuleDeprecatedStorageVersion = "deprecated-storage-version"
	RuleDeprecatedServedNoRetire = "deprecated-version-not-retired"
	RuleWebhookNoEndpoint        = "conversion-webhook-no-endpoint"
	RuleWebhookNotChecked        = "conversion-webhook-not-checked"
	RuleInTreeMigrationFailed    = "storage-version-migration-failed"
	RulePolicyStalled            = "policy-stalled"
	// RuleReleasePrefix prefixes graduator check's rule names in the
	// findings of --against.
	RuleReleasePrefix = "release/"
)

// Finding is one thing a person must act on. The JSON field names are a
// contract.
type Finding struct {
	CRD      string   `json:"crd"`
	Rule     string   `json:"rule"`
	Severity Severity `json:"severity"`
	// Why is one line: what breaks, and when.
	Why string `json:"why"`
	// Fix is the command or the policy that fixes it.
	Fix string `json:"fix"`
}

// Policy is what the scan needs of a CRDVersionPolicy named after a CRD.
type Policy struct {
	Name string
	// Unserve lists the versions the policy will stop serving.
	Unserve []string
	// Stalled is the kstatus Stalled condition's reason and message when
	// it is True (a graduation that waits for a person), else empty.
	StalledReason, StalledMessage string
}

// InTreeMigration is one in-tree StorageVersionMigration.
type InTreeMigration struct {
	Name string
	// Resource is "resource.group", as the CRD's name is.
	Resource string
	// Failed is true when its Failed condition is True; Message says why.
	Failed  bool
	Message string
}

// Service is what the scan saw of a conversion webhook's Service.
type Service struct {
	// NotChecked, when set, is why the Service was not read (the permission
	// the scan lacks); the other fields are then unknown.
	NotChecked string
	Missing    bool
	// ReadyEndpoints counts the ready endpoints of its EndpointSlices.
	ReadyEndpoints int
}

// ServiceKey names a Service.
type ServiceKey struct{ Namespace, Name string }

// Cluster is what the scan read of one cluster.
type Cluster struct {
	CRDs []apiextensionsv1.CustomResourceDefinition
	// PolicyAPI is true when the CRDVersionPolicy API is installed.
	PolicyAPI bool
	// Policies are keyed by the CRD they govern (their name).
	Policies map[string]Policy
	// InTree are the in-tree StorageVersionMigrations (none before 1.37).
	InTree []InTreeMigration
	// Services are the conversion webhooks' Services.
	Services map[ServiceKey]Service
	// Release, when set, are the CRDs a release is about to apply
	// (--against), checked with graduator check's rules and Config.
	Release map[string]*apiextensionsv1.CustomResourceDefinition
	Config  check.Config
	// Against are the release's sources as --against named them, and
	// Context the cluster's kubeconfig context: advice that runs prepare
	// names them, so that it can be run as written.
	Against []string
	Context string
}

// Scan runs every rule over a cluster and returns the findings, sorted by
// CRD, then severity (worst first), then rule.
func Scan(c Cluster) []Finding {
	var out []Finding
	for i := range c.CRDs {
		crd := &c.CRDs[i]
		out = append(out, StaleStoredVersions(crd)...)
		out = append(out, StoredNotServed(crd)...)
		out = append(out, StorageNotServed(crd)...)
		out = append(out, DeprecatedStorageVersion(crd)...)
		out = append(out, DeprecatedServedNotRetired(crd, c.PolicyAPI, c.Policies)...)
		out = append(out, ConversionWebhook(crd, c.Services)...)
		out = append(out, InTreeMigrationFailed(crd, c.InTree)...)
		out = append(out, PolicyStalled(crd, c.Policies)...)
	}
	if c.Release != nil {
		out = append(out, Against(c)...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.CRD != b.CRD {
			return a.CRD < b.CRD
		}
		if rank[a.Severity] != rank[b.Severity] {
			return rank[a.Severity] > rank[b.Severity]
		}
		return a.Rule < b.Rule
	})
	return out
}

// StaleStoredVersions: status.storedVersions lists versions besides the
// storage version. A CRD update that drops one of them is refused by the API
// server, and objects may still be encoded in them.
func StaleStoredVersions(crd *apiextensionsv1.CustomResourceDefinition) []Finding {
	stale := graduation.StaleStoredVersions(crd)
	if len(stale) == 0 {
		return nil
	}
	return []Finding{{
		CRD: crd.Name, Rule: RuleStaleStoredVersions, Severity: Error,
		Why: fmt.Sprintf("status.storedVersions still lists %s besides the storage version %s: a release that drops %s is refused "+
			"by the API server, and objects may still be encoded in %s", versions(stale), orNone(graduation.StorageVersion(crd)),
			itOrThem(stale), itOrThem(stale)),
		Fix: fmt.Sprintf("graduator migrate %s --prune (or a CRDVersionPolicy named %s)", crd.Name, crd.Name),
	}}
}

// StoredNotServed: a stored version that is no longer served; its objects
// are readable only through the storage version.
func StoredNotServed(crd *apiextensionsv1.CustomResourceDefinition) []Finding {
	storage := graduation.StorageVersion(crd)
	var out []Finding
	for _, v := range crd.Status.StoredVersions {
		if v == storage || served(crd, v) {
			continue
		}
		out = append(out, Finding{
			CRD: crd.Name, Rule: RuleStoredNotServed, Severity: Warning,
			Why: fmt.Sprintf("%s is in status.storedVersions but no longer served: its objects are readable only through %s, "+
				"and it cannot leave spec.versions until they are rewritten", v, orNone(storage)),
			Fix: fmt.Sprintf("graduator migrate %s --prune", crd.Name),
		})
	}
	return out
}

// StorageNotServed: the storage version is not served (the API server
// accepts a switch to an unserved version). Discovery shows no hash for
// it, so no migration into it can settle, and no client reads objects at
// the version they are stored in.
func StorageNotServed(crd *apiextensionsv1.CustomResourceDefinition) []Finding {
	storage := graduation.StorageVersion(crd)
	if storage == "" || served(crd, storage) {
		return nil
	}
	return []Finding{{
		CRD: crd.Name, Rule: RuleStorageNotServed, Severity: Error,
		Why: fmt.Sprintf("the storage version %s is not served: discovery shows no hash for it, so no migration into it can "+
			"settle, and clients cannot read objects at the version they are stored in", storage),
		Fix: fmt.Sprintf("set served: true on %s in the CRD manifest, or run graduator prepare --against the release, which "+
			"serves it", storage),
	}}
}

// DeprecatedStorageVersion: the version every object is written in is
// deprecated, so the release that removes it must first move storage.
func DeprecatedStorageVersion(crd *apiextensionsv1.CustomResourceDefinition) []Finding {
	storage := graduation.StorageVersion(crd)
	v := version(crd, storage)
	if v == nil || !v.Deprecated {
		return nil
	}
	return []Finding{{
		CRD: crd.Name, Rule: RuleDeprecatedStorageVersion, Severity: Warning,
		Why: fmt.Sprintf("the storage version %s is deprecated: every object is written in a version a later release removes", storage),
		Fix: fmt.Sprintf("a CRDVersionPolicy named %s with spec.storageVersion set to a newer version, or set storage: true "+
			"on one in the CRD manifest and run graduator migrate %s --prune", crd.Name, crd.Name),
	}}
}

// DeprecatedServedNotRetired: a served, deprecated version (not the storage
// version) that no policy is set to stop serving. Where no CRDVersionPolicy
// governs the CRD, the version is its vendor's to retire, not the
// cluster's: a vendor serves a deprecated version on purpose while its own
// controllers and providers still read it, and unserving it here breaks
// them. That is information, with the vendor's release notes as the thing
// to watch. Where a policy governs the CRD (the cluster took the CRD's
// versions in hand) and does not list the version, it is a warning: the
// policy's authors meant to retire versions and left this one out.
func DeprecatedServedNotRetired(crd *apiextensionsv1.CustomResourceDefinition, policyAPI bool, policies map[string]Policy) []Finding {
	storage := graduation.StorageVersion(crd)
	var out []Finding
	for _, v := range crd.Spec.Versions {
		if !v.Served || !v.Deprecated || v.Name == storage {
			continue
		}
		p, governed := policies[crd.Name]
		if governed && slices.Contains(p.Unserve, v.Name) {
			continue
		}
		if !governed {
			fix := fmt.Sprintf("check the release notes of the vendor of %s for when %s stops being served, and move its clients "+
				"before then; to retire it on this cluster, list it in spec.unserve of a CRDVersionPolicy named %s", crd.Name, v.Name, crd.Name)
			if !policyAPI {
				fix = fmt.Sprintf("check the release notes of the vendor of %s for when %s stops being served, and move its clients "+
					"before then; the vendor's controllers may still read it, so do not unserve it on your own", crd.Name, v.Name)
			}
			out = append(out, Finding{
				CRD: crd.Name, Rule: RuleDeprecatedServedNoRetire, Severity: Info,
				Why: fmt.Sprintf("%s is deprecated but still served, and no CRDVersionPolicy governs the CRD: retiring it is "+
					"its vendor's call", v.Name),
				Fix: fix,
			})
			continue
		}
		out = append(out, Finding{
			CRD: crd.Name, Rule: RuleDeprecatedServedNoRetire, Severity: Warning,
			Why: fmt.Sprintf("%s is deprecated but still served, and the CRDVersionPolicy %s does not list it in spec.unserve: "+
				"its clients get no deadline", v.Name, p.Name),
			Fix: fmt.Sprintf("list %s in spec.unserve of the CRDVersionPolicy %s once its clients moved", v.Name, p.Name),
		})
	}
	return out
}

// ConversionWebhook: a Webhook conversion whose Service has no ready
// endpoint fails every read at a version other than the stored one.
func ConversionWebhook(crd *apiextensionsv1.CustomResourceDefinition, services map[ServiceKey]Service) []Finding {
	ref := webhookService(crd)
	if ref == nil {
		return nil
	}
	key := ServiceKey{Namespace: ref.Namespace, Name: ref.Name}
	svc, ok := services[key]
	if !ok {
		return nil // the scan did not look: a URL webhook, say
	}
	name := key.Namespace + "/" + key.Name
	switch {
	case svc.NotChecked != "":
		return []Finding{{
			CRD: crd.Name, Rule: RuleWebhookNotChecked, Severity: Info,
			Why: fmt.Sprintf("the conversion webhook's Service %s was not checked: %s", name, svc.NotChecked),
			Fix: "grant get on services and list on endpointslices.discovery.k8s.io (the graduator-scan ClusterRole) to check it",
		}}
	case svc.Missing:
		return []Finding{{
			CRD: crd.Name, Rule: RuleWebhookNoEndpoint, Severity: Error,
			Why: fmt.Sprintf("the conversion webhook's Service %s does not exist: every read at a version other than "+
				"the stored one fails", name),
			Fix: fmt.Sprintf("deploy the conversion webhook (Service %s), or set spec.conversion.strategy: None if no "+
				"conversion is needed", name),
		}}
	case svc.ReadyEndpoints == 0:
		return []Finding{{
			CRD: crd.Name, Rule: RuleWebhookNoEndpoint, Severity: Error,
			Why: fmt.Sprintf("the conversion webhook's Service %s has no ready endpoint: every read at a version other than "+
				"the stored one fails", name),
			Fix: fmt.Sprintf("kubectl -n %s get endpointslices -l kubernetes.io/service-name=%s; bring the webhook's pods up",
				key.Namespace, key.Name),
		}}
	}
	return nil
}

// WebhookServices are the Services of the CRDs' conversion webhooks: what
// the CLI reads for ConversionWebhook.
func WebhookServices(crds []apiextensionsv1.CustomResourceDefinition) []ServiceKey {
	seen := map[ServiceKey]bool{}
	var out []ServiceKey
	for i := range crds {
		if ref := webhookService(&crds[i]); ref != nil {
			key := ServiceKey{Namespace: ref.Namespace, Name: ref.Name}
			if !seen[key] {
				seen[key] = true
				out = append(out, key)
			}
		}
	}
	return out
}

// InTreeMigrationFailed: an in-tree StorageVersionMigration of the CRD's
// resource failed; objects may be left in older versions.
func InTreeMigrationFailed(crd *apiextensionsv1.CustomResourceDefinition, migrations []InTreeMigration) []Finding {
	resource := crd.Spec.Names.Plural + "." + crd.Spec.Group
	var out []Finding
	for _, m := range migrations {
		if m.Resource != resource || !m.Failed {
			continue
		}
		out = append(out, Finding{
			CRD: crd.Name, Rule: RuleInTreeMigrationFailed, Severity: Error,
			Why: fmt.Sprintf("the StorageVersionMigration %s failed (%s): objects may be left in older versions", m.Name, orNone(m.Message)),
			Fix: fmt.Sprintf("kubectl get storageversionmigration %s -o yaml; fix the cause, delete it and migrate again "+
				"(graduator migrate %s)", m.Name, crd.Name),
		})
	}
	return out
}

// PolicyStalled: the CRD's policy waits for a person (kstatus Stalled).
func PolicyStalled(crd *apiextensionsv1.CustomResourceDefinition, policies map[string]Policy) []Finding {
	p, ok := policies[crd.Name]
	if !ok || p.StalledReason == "" {
		return nil
	}
	return []Finding{{
		CRD: crd.Name, Rule: RulePolicyStalled, Severity: Error,
		Why: fmt.Sprintf("the CRDVersionPolicy %s is stalled (%s): %s", p.Name, p.StalledReason, orNone(p.StalledMessage)),
		Fix: fmt.Sprintf("graduator status %s shows what it waits for", crd.Name),
	}}
}

// Against is graduator check between this cluster's CRDs and a release's:
// this release would be refused here, or would orphan objects here. Only
// the CRDs the release ships are compared (a cluster holds other projects').
func Against(c Cluster) []Finding {
	old := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for i := range c.CRDs {
		if _, ok := c.Release[c.CRDs[i].Name]; ok {
			old[c.CRDs[i].Name] = &c.CRDs[i]
		}
	}
	var out []Finding
	for _, f := range check.Compare(old, c.Release, c.Config) {
		sev := Warning
		if f.Enforcement == check.Error {
			sev = Error
		}
		why := f.Message
		if f.Path != "" {
			why = f.Version + " " + f.Path + ": " + why
		}
		out = append(out, Finding{
			CRD: f.CRD, Rule: RuleReleasePrefix + f.Rule, Severity: sev, Why: why,
			Fix: fmt.Sprintf("graduator check cluster RELEASE --context CONTEXT shows it; rule %s (graduator check --list-rules)", f.Rule),
		})
		if f.Rule == "stored-version-removed" && old[f.CRD] != nil && f.Version == graduation.StorageVersion(old[f.CRD]) {
			storageRemoved(&out[len(out)-1], f.Version, graduation.StorageVersion(c.Release[f.CRD]), c)
		}
	}
	return out
}

// storageRemoved is the advice of release/stored-version-removed where
// the removed version is the cluster's storage version: migrating cannot
// help (every object is already stored in it). A release that stores an
// older version is a rollback, which `graduator prepare --against` carries
// out; one that stores a newer version needs the release between them.
func storageRemoved(f *Finding, from, target string, c Cluster) {
	if target == "" || !graduation.IsRollback(from, target) {
		f.Fix = fmt.Sprintf("apply a release that serves %s and stores a newer version first, then %s", from, PrepareCommand(c))
		return
	}
	f.Why = fmt.Sprintf("%s is the storage version here (every object is stored in it) and the release drops it for the older %s: "+
		"the API server refuses the release until every object is rewritten as %s and storedVersions is [%s]", from, target, target, target)
	f.Fix = fmt.Sprintf("%s (a rollback: it serves %s, proves the round trip, makes %s the storage version, rewrites every object "+
		"and prunes storedVersions; --dry-run shows the plan)", PrepareCommand(c), target, target)
}

// PrepareCommand is `graduator prepare` against the cluster's release, as
// the scan was told it.
func PrepareCommand(c Cluster) string {
	cmd := "graduator prepare"
	against := c.Against
	if len(against) == 0 {
		against = []string{"RELEASE"}
	}
	for _, a := range against {
		cmd += " --against " + shellQuote(a)
	}
	if c.Context != "" {
		cmd += " --context " + shellQuote(c.Context)
	}
	return cmd
}

// shellQuote quotes s for a POSIX shell when it needs it, so that the
// advice runs as written.
func shellQuote(s string) string {
	plain := func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+", r)
	}
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return !plain(r) }) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func webhookService(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.ServiceReference {
	c := crd.Spec.Conversion
	if c == nil || c.Strategy != apiextensionsv1.WebhookConverter || c.Webhook == nil || c.Webhook.ClientConfig == nil {
		return nil
	}
	return c.Webhook.ClientConfig.Service
}

func version(crd *apiextensionsv1.CustomResourceDefinition, name string) *apiextensionsv1.CustomResourceDefinitionVersion {
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == name {
			return &crd.Spec.Versions[i]
		}
	}
	return nil
}

func served(crd *apiextensionsv1.CustomResourceDefinition, name string) bool {
	v := version(crd, name)
	return v != nil && v.Served
}

func versions(vs []string) string { return strings.Join(vs, ", ") }

func itOrThem(vs []string) string {
	if len(vs) == 1 {
		return vs[0]
	}
	return "them"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
