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

package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// WriteTarget says where the migration sends its no-op writes.
// +kubebuilder:validation:Enum=Object;Status
type WriteTarget string

const (
	// WriteToObject patches the object itself. This is the default and what
	// almost every CRD needs.
	WriteToObject WriteTarget = "Object"
	// WriteToStatus patches the /status subresource, for CRDs whose admission
	// webhooks reject no-op writes to the main resource. The CRD must have the
	// status subresource enabled.
	WriteToStatus WriteTarget = "Status"
)

// Subresources returns the subresource path the no-op writes take: none for
// Object, "status" for Status. The migration and the operator's dry-run
// preflight take the same path.
func (t WriteTarget) Subresources() []string {
	if t == WriteToStatus {
		return []string{"status"}
	}
	return nil
}

// FleetLabel marks a policy that a selector policy (a fleet) generated for
// one of its CRDs; its value is the fleet's name.
const FleetLabel = "graduator.io/fleet"

// Priority says how much of the API server a migration takes.
// +kubebuilder:validation:Enum=Background;Full
type Priority string

const (
	// PriorityBackground is polite to the other clients that write while it
	// runs. It watches two things: their write rate (counted by etcd's
	// revision), kept at 55% or more of what they write without the
	// migration, measured by pausing it for 150 ms every 3 s while they
	// write (their rate alone is the mean of the last ten pauses: the
	// server's speed swings over seconds); and, while they keep 90% of that rate or more (a client
	// writing at its own pace keeps its rate), its own write latency, kept
	// within 1.7 times the latency of one write of its alone, so that such
	// a client does not wait long behind it (every client's writes wait in
	// the same queue). It starts at one writer and pauses after its first write, so
	// that it has measured the others before it takes more; beside them it
	// takes no more than 8 writers until a second pause, clear of its own
	// setup (its first page, the watch it starts), measured them again. On
	// an API server other clients barely write to, it is Full from its
	// first pause on (150 ms and one write). Its targets,
	// held by its simulator and measured by the project's bench: closed-loop
	// clients keep half their write rate or more; a client writing at its
	// own pace keeps its rate and its p99 latency within twice its p99
	// alone or 20 ms more, whichever is more; idle, a whole run reaches
	// 0.90 of a 64-writer client's rate.
	// It cannot see readers (a LIST is not counted by etcd's revision) nor
	// writes to another etcd: API Priority and Fairness (the chart's
	// FlowSchema and PriorityLevelConfiguration) arbitrates those, by
	// bounding the migration's requests in flight, not the CPU they take.
	// The default.
	PriorityBackground Priority = "Background"
	// PriorityFull takes the server's full speed, for maintenance windows:
	// writers climb to concurrency and come down only when the server
	// throttles (429), fails (5xx, timeouts) or its throughput collapses,
	// whatever that costs other clients. Its target: a whole run at 0.95
	// of a 64-writer client's rate on an idle server.
	PriorityFull Priority = "Full"
)

// Engine says which migrator rewrites the objects of a CRD.
// +kubebuilder:validation:Enum=Graduator;StorageVersionMigration
type Engine string

const (
	// EngineGraduator is Graduator's own engine: paged, concurrent, polite by
	// default, with a catch-up sweep. The default.
	EngineGraduator Engine = "Graduator"
	// EngineStorageVersionMigration hands the rewrite to Kubernetes' in-tree
	// migrator (storagemigration.k8s.io/v1 StorageVersionMigration, run by
	// kube-controller-manager's storage-version-migrator-controller, GA in
	// 1.37): Graduator creates one for the CRD's resource after the storage
	// switch settled, follows it, and recreates it when it Failed.
	EngineStorageVersionMigration Engine = "StorageVersionMigration"
)

// Phase is the step of the graduation a policy is in.
// +kubebuilder:validation:Enum=Pending;Preflight;SwitchingStorage;Migrating;Pruning;Retiring;Graduated;Blocked
type Phase string

// The phases of a graduation, in the order a CRD walks through them. Blocked
// can follow any of them; its reason is in the conditions.
const (
	PhasePending          Phase = "Pending"
	PhasePreflight        Phase = "Preflight"
	PhaseSwitchingStorage Phase = "SwitchingStorage"
	PhaseMigrating        Phase = "Migrating"
	PhasePruning          Phase = "Pruning"
	PhaseRetiring         Phase = "Retiring"
	PhaseGraduated        Phase = "Graduated"
	PhaseBlocked          Phase = "Blocked"
)

// Phases lists every Phase in the order above (the phase metric has one
// series each).
var Phases = []Phase{
	PhasePending, PhasePreflight, PhaseSwitchingStorage, PhaseMigrating, PhasePruning, PhaseRetiring, PhaseGraduated, PhaseBlocked,
}

// Condition types set on a CRDVersionPolicy. Each one can be waited on with
// `kubectl wait --for=condition=<type>`.
const (
	// ConditionReady is True when the policy is fully carried out.
	ConditionReady = "Ready"
	// ConditionPreflightPassed is True when the checks before the storage
	// switch passed.
	ConditionPreflightPassed = "PreflightPassed"
	// ConditionStorageVersionSet is True when the CRD stores the policy's
	// storage version.
	ConditionStorageVersionSet = "StorageVersionSet"
	// ConditionMigrated is True when every object was rewritten in the
	// storage version.
	ConditionMigrated = "Migrated"
	// ConditionStoredVersionsPruned is True when status.storedVersions of the
	// CRD lists only the storage version.
	ConditionStoredVersionsPruned = "StoredVersionsPruned"
	// ConditionVersionsRetired is True when every listed version is
	// deprecated or unserved as the policy asks.
	ConditionVersionsRetired = "VersionsRetired"

	// ConditionReconciling is True while a step of the graduation is under
	// way, a failed step that is retried by itself included; its reason is
	// the step (the phase). kstatus (Flux, kpt, kapp) reads it as InProgress.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the graduation cannot move on until a
	// person changes something (the policy, the CRD, RBAC); its reason and
	// message are Ready's. kstatus reads it as Failed.
	ConditionStalled = "Stalled"
)

// CRDVersionPolicySpec says which version a CustomResourceDefinition should
// store and which of its old versions to deprecate and stop serving.
//
// +kubebuilder:validation:XValidation:rule="!has(self.storageVersion) || !has(self.unserve) || self.unserve.all(u, u.version != self.storageVersion)",message="storageVersion cannot also be listed in unserve: the API server needs the storage version served"
// +kubebuilder:validation:XValidation:rule="!has(self.selector) || (!has(self.storageVersion) && !has(self.deprecate) && !has(self.unserve))",message="a policy with a selector follows each CRD's own storage version (GitOps mode): storageVersion, deprecate and unserve are for a policy named after one CRD"
type CRDVersionPolicySpec struct {
	// Selector makes this a fleet policy: every CRD it selects is migrated
	// and pruned whenever its manifest's storage version leaves older
	// versions in status.storedVersions, in GitOps mode (spec.versions is
	// never written). A policy named after a CRD takes precedence over any
	// selector; of two selectors, the older one wins. Such a policy may have
	// any name.
	// +optional
	Selector *CRDSelector `json:"selector,omitempty"`

	// StorageVersion is the version the CRD should store. Graduator sets
	// storage: true on it, rewrites every object and prunes
	// status.storedVersions. Leave it empty to let the CRD manifest own the
	// storage flag (GitOps mode): Graduator then migrates and prunes whenever
	// the CRD's own storage version changes and never writes spec.versions.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="storageVersion must be a version name such as v1 or v1beta1: lower-case letters, digits and '-', starting with a letter"
	StorageVersion string `json:"storageVersion,omitempty"`

	// Deprecate lists versions to mark deprecated. They stay served, and
	// clients that use them get the warning.
	// +optional
	// +listType=map
	// +listMapKey=version
	// +kubebuilder:validation:MaxItems=32
	Deprecate []DeprecatedVersion `json:"deprecate,omitempty"`

	// Unserve lists versions to stop serving once it is safe: after the grace
	// period, and never while the version is stored. Remove a version from
	// this list (or set served: true on the CRD in GitOps mode) to roll back.
	// +optional
	// +listType=map
	// +listMapKey=version
	// +kubebuilder:validation:MaxItems=32
	Unserve []UnservedVersion `json:"unserve,omitempty"`

	// Migration tunes the storage migration.
	// +optional
	// +kubebuilder:default={}
	Migration MigrationSettings `json:"migration,omitempty"`

	// CleanupManagedFields drops metadata.managedFields entries of versions
	// that are no longer served, which otherwise break later server-side
	// applies. Defaults to true.
	// +optional
	// +kubebuilder:default=true
	CleanupManagedFields *bool `json:"cleanupManagedFields,omitempty"`

	// Paused stops Graduator from taking any further step. A running
	// migration stops between writes and resumes from its saved progress when
	// the policy is unpaused.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// CRDSelector selects CRDs by group and by labels; a CRD must match both
// when both are set.
// +kubebuilder:validation:XValidation:rule="(has(self.groups) && size(self.groups) > 0) || (has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="selector must name groups or labels: an empty selector would select every CRD of the cluster"
type CRDSelector struct {
	// Groups are API groups, exact (gateway.networking.k8s.io) or a suffix
	// wildcard (*.crossplane.io matches every subgroup).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^([*][.])?[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="a group is a DNS name such as example.com, or *.example.com for its subgroups"
	Groups []string `json:"groups,omitempty"`
	// MatchLabels and MatchExpressions select CRDs by their labels, as a
	// label selector does.
	// +optional
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	// +optional
	// +listType=atomic
	MatchExpressions []metav1.LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// FleetStatus sums up the CRDs a selector policy governs.
type FleetStatus struct {
	// Selected is the number of CRDs the selector matches.
	Selected int32 `json:"selected"`
	// Phases counts the governed CRDs per phase of their graduation.
	// +optional
	Phases map[string]int32 `json:"phases,omitempty"`
	// Migrating lists the CRDs being migrated now, with their progress.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	Migrating []FleetMember `json:"migrating,omitempty"`
	// Blocked lists some CRDs that cannot go on, with the reason.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	Blocked []FleetMember `json:"blocked,omitempty"`
	// GovernedElsewhere lists some selected CRDs that another policy
	// governs: one named after the CRD, or an older selector.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	GovernedElsewhere []FleetMember `json:"governedElsewhere,omitempty"`
}

// FleetMember is one CRD of a fleet.
type FleetMember struct {
	// CRD is the CRD's name.
	CRD string `json:"crd"`
	// Message is its progress, its blocking reason, or its governing policy.
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message"`
}

// DeprecatedVersion is a version to mark deprecated.
type DeprecatedVersion struct {
	// Version is the name of a version of the CRD, such as v1alpha1.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="version must be a version name such as v1 or v1beta1: lower-case letters, digits and '-', starting with a letter"
	Version string `json:"version"`

	// Warning is returned to clients that use the version. The API server
	// writes a default warning when it is empty.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Warning string `json:"warning,omitempty"`
}

// UnservedVersion is a version to stop serving.
type UnservedVersion struct {
	// Version is the name of a version of the CRD, such as v1alpha1.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="version must be a version name such as v1 or v1beta1: lower-case letters, digits and '-', starting with a letter"
	Version string `json:"version"`

	// After is the grace period, counted from when the version was marked
	// deprecated, before it stops being served. A Go duration such as 168h.
	// Zero unserves the version as soon as it is no longer stored.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$')",message="after must be a duration such as 168h, 90m or 0s"
	After *metav1.Duration `json:"after,omitempty"`
}

// MigrationSettings tunes the storage migration.
type MigrationSettings struct {
	// Concurrency is the upper bound on writes in flight. The number adapts
	// below it as Priority says, and halves when the server throttles (429,
	// 5xx, timeouts). 64 when unset.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	Concurrency int32 `json:"concurrency,omitempty"`
	// PageSize is the migration pass's page: the most objects each LIST call
	// of its pass fetches (metadata only), and the batch its writers take.
	// While the adaptive concurrency allows few writers, the pass lists
	// fewer (16 a writer, at least 50 and a 200th of the objects left), so
	// that a LIST stalls the API server no longer than the writes it feeds. The round-trip proof and the
	// cleanup of managedFields read whole objects in pages of their own
	// (2,000).
	// +optional
	// +kubebuilder:default=500
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	PageSize int64 `json:"pageSize,omitempty"`
	// QPS is an optional ceiling on writes per second. None when unset: API
	// Priority and Fairness protects the API server, and the adaptive
	// concurrency backs off when it says so.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	QPS int32 `json:"qps,omitempty"`
	// WriteTo is where the no-op writes go: Object (the default) or Status,
	// for CRDs whose admission webhooks reject no-op writes to the object.
	// +optional
	// +kubebuilder:default=Object
	WriteTo WriteTarget `json:"writeTo,omitempty"`
	// Priority is how much of the API server the migration takes.
	// Background (the default) is polite: while others write, they keep 55%
	// or more of the write rate they have without the migration (measured
	// by pausing it briefly now and then), and while they keep their rate
	// the migration's own write latency stays within 1.7 times its latency
	// alone (a client that writes at its own pace waits behind the
	// migration's writes); it
	// starts at one writer and measures the others after its first write,
	// and beside them takes no more than 8 writers until a second pause
	// measured them again; on a server others barely write to it is Full.
	// It sees writes to its etcd, not readers nor other etcds: the API
	// server's Priority and Fairness
	// (the chart's FlowSchema and PriorityLevelConfiguration) bounds its
	// requests in flight against those. Full takes the server's full speed
	// (writers climb to concurrency), for maintenance windows: other
	// clients then keep only what Priority and Fairness leaves them.
	// +optional
	// +kubebuilder:default=Background
	Priority Priority `json:"priority,omitempty"`
	// Engine is what rewrites the objects: Graduator (the default) or
	// StorageVersionMigration, Kubernetes' in-tree migrator (1.37+, needs
	// kube-controller-manager's storage-version-migrator-controller and the
	// right to create, get, watch and delete storageversionmigrations). With
	// StorageVersionMigration, Concurrency, PageSize, QPS, WriteTo and
	// Priority do not apply: the in-tree migrator patches one object after
	// another.
	// +optional
	// +kubebuilder:default=Graduator
	Engine Engine `json:"engine,omitempty"`

	// EtcdQuota is etcd's space quota (its --quota-backend-bytes; etcd's
	// default is 2Gi), when known, such as 8Gi. The migration keeps the
	// bytes it adds to etcd between two compactions under a budget, so
	// that it never fills etcd: the database may grow to 3/4 of the quota.
	// Not told, etcd's default 2Gi is assumed (a database already larger
	// than 60% of it may grow by a quarter of its size), so a cluster that
	// lowered its quota must tell it. The operator's --etcd-quota (the
	// chart's etcdQuota) applies when unset. Does not apply to engine
	// StorageVersionMigration.
	// +optional
	EtcdQuota *resource.Quantity `json:"etcdQuota,omitempty"`

	// SettleDelay is how long to wait after the storage version switched
	// before the migration starts, so that every API server of the control
	// plane writes the new version. A Go duration; defaults to 10s.
	// +optional
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$')",message="settleDelay must be a duration such as 10s or 1m"
	SettleDelay *metav1.Duration `json:"settleDelay,omitempty"`

	// RoundTripProof is how many objects the round-trip proof converts
	// before the first migration write: Every (the default) converts every
	// object there and back, in batched conversion reviews while the next
	// page is read; Sample proves only a sample that carries every field
	// path and every value class present in the objects (per path its zero
	// value, a null, each value of an enum-like or declared enum path, each
	// JSON type, the extremes, an empty and a one-item list or map), which
	// is faster on a large population but blind to a loss that only a
	// value outside those classes triggers.
	// +optional
	// +kubebuilder:default=Every
	RoundTripProof RoundTripProofScope `json:"roundTripProof,omitempty"`

	// AcceptLoss lists the field paths whose loss by the conversion the
	// policy's authors accept: the round-trip proof reports them in
	// status.roundTrip instead of stopping the graduation. A path is a JSON
	// pointer with * for every item of a list, such as /spec/legacyPort or
	// /status/conditions/*/reason ('/' in a key is written ~1, '~' is
	// ~0); it accepts the paths under it too.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^(/([^/~]|~[01])+)+$')",message="a field path is a JSON pointer such as /spec/legacyPort or /status/conditions/*/reason: segments after '/', none empty, '~' only as ~0 or ~1"
	AcceptLoss []string `json:"acceptLoss,omitempty"`
}

// RoundTripProofScope says which objects the round-trip proof converts.
// +kubebuilder:validation:Enum=Sample;Every
type RoundTripProofScope string

const (
	// RoundTripProofEvery proves every object: the default.
	RoundTripProofEvery RoundTripProofScope = "Every"
	// RoundTripProofSample proves a sample carrying every field path and
	// every value class present in the objects.
	RoundTripProofSample RoundTripProofScope = "Sample"
)

// EtcdQuotaBytes is EtcdQuota in bytes, or fallback (the operator's
// --etcd-quota; 0: unknown) when unset.
func (m MigrationSettings) EtcdQuotaBytes(fallback int64) int64 {
	if m.EtcdQuota == nil || m.EtcdQuota.Value() <= 0 {
		return fallback
	}
	return m.EtcdQuota.Value()
}

// CRDVersionPolicyStatus is what Graduator observed and did.
type CRDVersionPolicyStatus struct {
	// ObservedGeneration is the policy generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase is the step of the graduation the CRD is in.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// StorageVersion is the CRD's storage version as last observed.
	// +optional
	StorageVersion string `json:"storageVersion,omitempty"`

	// StorageVersionSince is when Graduator first observed the CRD storing
	// StorageVersion. The migration waits for the settle delay after it.
	// +optional
	StorageVersionSince *metav1.Time `json:"storageVersionSince,omitempty"`

	// StoredVersions is the CRD's status.storedVersions as last observed.
	// +optional
	// +listType=atomic
	StoredVersions []string `json:"storedVersions,omitempty"`

	// Versions is the state of each version of the CRD as last observed.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Versions []VersionStatus `json:"versions,omitempty"`

	// Migration is the durable progress of the storage migration: a
	// restarted operator resumes from here.
	// +optional
	Migration *MigrationStatus `json:"migration,omitempty"`

	// RoundTrip is what the last round-trip proof found: how much it
	// proved, and the losses it found, accepted or not.
	// +optional
	RoundTrip *RoundTripStatus `json:"roundTrip,omitempty"`

	// Retries counts the failed attempts of the current step in a row (a
	// conversion webhook down, the API server unavailable, no permission);
	// the wait before the next one doubles from 5s up to 5m. Zero once the
	// step succeeds.
	// +optional
	Retries int32 `json:"retries,omitempty"`
	// Fleet sums up the CRDs of a selector policy.
	// +optional
	Fleet *FleetStatus `json:"fleet,omitempty"`
	// Conditions say what is done and, when something is not, why.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// VersionStatus is the observed state of one version of the CRD.
type VersionStatus struct {
	// Name of the version.
	Name string `json:"name"`
	// Served is the version's served flag.
	// +optional
	Served bool `json:"served,omitempty"`
	// Storage is the version's storage flag.
	// +optional
	Storage bool `json:"storage,omitempty"`
	// Deprecated is the version's deprecated flag.
	// +optional
	Deprecated bool `json:"deprecated,omitempty"`
	// DeprecatedSince is when Graduator first observed the version
	// deprecated. The grace period before it stops being served counts from
	// here.
	// +optional
	DeprecatedSince *metav1.Time `json:"deprecatedSince,omitempty"`
	// ManagedFieldsCleaned is true once the managedFields entries of this
	// (unserved) version were removed from every object.
	// +optional
	ManagedFieldsCleaned bool `json:"managedFieldsCleaned,omitempty"`
}

// MigrationStatus is the progress of one storage migration run.
type MigrationStatus struct {
	// CRDGeneration is the CRD generation the run started on. The run
	// restarts when the CRD changes under it, and pruning is refused.
	// +optional
	CRDGeneration int64 `json:"crdGeneration,omitempty"`

	// StorageVersion is the version the run migrates objects to.
	// +optional
	StorageVersion string `json:"storageVersion,omitempty"`

	// ResourceVersion is the checkpoint taken after the storage switch
	// settled: objects written after it are already stored in the new
	// version and are not rewritten.
	// +optional
	ResourceVersion string `json:"resourceVersion,omitempty"`

	// ContinueToken is where the listing resumes (the catch-up sweep's
	// listing once CatchUp is true).
	// +optional
	ContinueToken string `json:"continueToken,omitempty"`
	// CatchUp is true once every listed object is done and the catch-up
	// sweep rewrites the objects written while the run went on.
	// +optional
	CatchUp bool `json:"catchUp,omitempty"`
	// CatchUpResourceVersion is the second checkpoint, taken when the sweep
	// started: the sweep covers objects written between ResourceVersion and
	// it.
	// +optional
	CatchUpResourceVersion string `json:"catchUpResourceVersion,omitempty"`
	// CaughtUp is the number of objects the catch-up sweep rewrote.
	// +optional
	CaughtUp int64 `json:"caughtUp,omitempty"`
	// Sweep says how the catch-up sweep found the objects others wrote
	// during the run, once it started, and why: "watch: ..." (a watch from
	// the checkpoint collected them) or "list: ..." (the watch could not be
	// trusted to have seen every write, so every object was listed again).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Sweep string `json:"sweep,omitempty"`
	// Writers is the adaptive limit on writes in flight, as last reported.
	// +optional
	Writers int32 `json:"writers,omitempty"`
	// WritersReason says what the limit was doing when last reported:
	// Probing (stepping up), Holding (at the bound, where other clients keep
	// their share, or waiting after a throttle), BackingOff (halved after a
	// 429, 5xx, timeout or a collapse of the server's throughput), Yielding
	// (came down: other clients wrote less than 57% of their rate without
	// the migration), Queueing (came down: while other clients wrote, the
	// migration's own writes took more than 1.7 times as long as one write
	// alone), Pausing (paused a moment to measure the other clients alone)
	// or Fixed.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	WritersReason string `json:"writersReason,omitempty"`

	// SpaceBudget is the migration's etcd space budget and how it was set:
	// the bytes its writes not yet freed by a compaction may take, from
	// etcd's database size and quota, or why without them.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	SpaceBudget string `json:"spaceBudget,omitempty"`
	// CompactionWait, when set, says that the migration waits for etcd's
	// next compaction, since when and why: its writes not yet compacted
	// reached its etcd space budget.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	CompactionWait string `json:"compactionWait,omitempty"`

	// Listed is the number of objects listed so far.
	// +optional
	Listed int64 `json:"listed,omitempty"`
	// Rewritten is the number of objects rewritten so far.
	// +optional
	Rewritten int64 `json:"rewritten,omitempty"`
	// Skipped is the number of objects deleted or already rewritten by
	// someone else meanwhile.
	// +optional
	Skipped int64 `json:"skipped,omitempty"`
	// Failed is the number of objects that could not be rewritten.
	// +optional
	Failed int64 `json:"failed,omitempty"`

	// Progress is a human summary, "done/listed", for kubectl get: done
	// counts the objects rewritten, skipped and failed (Done).
	// +optional
	Progress string `json:"progress,omitempty"`

	// WrittenRanges are the resourceVersions of the run's own writes, as
	// ranges ("a-b,c"; a few hundred at most), so that a run resumed after
	// a restart does not write those objects again in its catch-up sweep.
	// +optional
	WrittenRanges string `json:"writtenRanges,omitempty"`

	// Failures names some of the objects that could not be rewritten.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	Failures []MigrationFailure `json:"failures,omitempty"`

	// APIServers are the API servers (host:port, the addresses of the
	// kubernetes EndpointSlices in default) every one of which served
	// StorageVersion's hash before the run's first write. The prune asks
	// them again, and a server not among them (one that joined during the
	// run, as in a rolling control-plane upgrade) starts the run again.
	// Empty when they could not be asked one by one: the settle delay was
	// waited instead (APIServersCheck says why).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=261
	APIServers []string `json:"apiServers,omitempty"`
	// APIServersCheck says how the API servers were checked before the
	// run's first write: every one asked, or why they could not be.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	APIServersCheck string `json:"apiServersCheck,omitempty"`

	// StartedAt is when the run started.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// CompletedAt is when the run listed and rewrote its last object.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`

	// StorageVersionMigration is the in-tree migration that carries out
	// this run (engine StorageVersionMigration).
	// +optional
	StorageVersionMigration *InTreeMigration `json:"storageVersionMigration,omitempty"`

	// Space is what the run's writes did to etcd's space, kept for the
	// writes that follow it (a resumed run, the managedFields cleanup, a
	// new run): their etcd space budget counts the pages these writes
	// freed as free, where etcd's file size alone would not.
	// +optional
	Space *EtcdSpaceLedger `json:"space,omitempty"`
}

// EtcdSpaceLedger is what a migration's writes did to etcd's space (the
// engine's migration.SpaceLedger).
type EtcdSpaceLedger struct {
	// InUse is the bytes of etcd's database the run's budget counted as in
	// use when it started.
	// +optional
	InUse int64 `json:"inUse,omitempty"`
	// Peak is the most bytes the run's writes (and those of the runs it
	// followed) held at once before a compaction freed them.
	// +optional
	Peak int64 `json:"peak,omitempty"`
	// Outstanding is the bytes of its writes not known to be compacted,
	// and Revision the highest resourceVersion its writes were given.
	// +optional
	Outstanding int64 `json:"outstanding,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Revision string `json:"revision,omitempty"`
}

// RoundTripStatus is the result of a round-trip proof: for each old
// version objects were stored in, objects converted old -> target -> old
// and compared with themselves.
type RoundTripStatus struct {
	// CRDGeneration is the CRD generation proven.
	// +optional
	CRDGeneration int64 `json:"crdGeneration,omitempty"`
	// Target is the version the round trip went through.
	// +optional
	Target string `json:"target,omitempty"`
	// Source is how the objects were converted: Webhook (the conversion
	// webhook asked directly), Pruning (strategy None: each schema's
	// pruning and defaulting) or DryRun (a dry-run write once the target
	// stores).
	// +optional
	Source string `json:"source,omitempty"`
	// Scope is Every when every object was proven, Sample for a sample.
	// +optional
	Scope RoundTripProofScope `json:"scope,omitempty"`
	// DryRun is the number of sampled objects a dry-run write proved too,
	// beside the conversion asked directly (once the target stores).
	// +optional
	DryRun int64 `json:"dryRun,omitempty"`
	// Versions are the old versions proven.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Versions []string `json:"versions,omitempty"`
	// Sampled is the number of objects converted and compared, over every
	// old version.
	// +optional
	Sampled int64 `json:"sampled,omitempty"`
	// Paths is the number of distinct field paths the objects carry, each
	// carried by a sampled object.
	// +optional
	Paths int64 `json:"paths,omitempty"`
	// Lossless is true when no path but an accepted one is lost.
	// +optional
	Lossless bool `json:"lossless,omitempty"`
	// Losses are the field paths lost and not accepted.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	Losses []FieldLoss `json:"losses,omitempty"`
	// Accepted are the paths of spec.migration.acceptLoss that were
	// actually lost.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	Accepted []FieldLoss `json:"accepted,omitempty"`
	// ProvedAt is when the proof ended.
	// +optional
	ProvedAt *metav1.Time `json:"provedAt,omitempty"`
}

// FieldLoss is a field path the round trip loses.
type FieldLoss struct {
	// Path is the field path, * for list items.
	// +kubebuilder:validation:MaxLength=512
	Path string `json:"path"`
	// Version is the old version whose round trip loses it.
	// +optional
	Version string `json:"version,omitempty"`
	// Objects is the number of sampled objects that lose it.
	// +optional
	Objects int64 `json:"objects,omitempty"`
	// Carriers is the number of objects listed that carry it.
	// +optional
	Carriers int64 `json:"carriers,omitempty"`
	// Examples name up to five objects (namespace/name) that lose it.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=5
	Examples []string `json:"examples,omitempty"`
}

// InTreeMigration is the StorageVersionMigration Graduator created for a run.
type InTreeMigration struct {
	// Name of the StorageVersionMigration.
	Name string `json:"name"`
	// UID of the StorageVersionMigration this run follows; one with the same
	// name and another UID is not this run's.
	// +optional
	UID types.UID `json:"uid,omitempty"`
	// Phase is Running, Succeeded or Failed, as last observed.
	// +optional
	Phase string `json:"phase,omitempty"`
	// Created is how many times this run created it (a Failed one is
	// deleted and created again).
	// +optional
	Created int32 `json:"created,omitempty"`
}

// MigrationFailure names an object the migration could not rewrite.
type MigrationFailure struct {
	// Namespace of the object; empty for cluster-scoped objects.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	Name string `json:"name"`
	// Reason is the error the API server returned.
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason"`
}

// CRDVersionPolicy governs the versions of one CustomResourceDefinition. Its
// name is the CRD's name, <plural>.<group>.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cvp;crdvp,categories=graduator
// +kubebuilder:printcolumn:name="Storage",type=string,JSONPath=`.status.storageVersion`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.migration.progress`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="(has(self.spec) && has(self.spec.selector)) || self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?){2,}$')",message="metadata.name must be the name of the CRD the policy governs, <plural>.<group>, such as pizzas.restaurant.example.com"
type CRDVersionPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec CRDVersionPolicySpec `json:"spec,omitempty"`
	// kstatus takes an object without status for done, so a release gated on
	// a policy the operator has not looked at yet would go on at once.

	// Status is what Graduator observed and did. It defaults to
	// observedGeneration 0, so that a policy no operator has looked at yet
	// reads as in progress (generation 1, observed 0) to GitOps tools.
	// +optional
	// +kubebuilder:default={observedGeneration: 0}
	Status CRDVersionPolicyStatus `json:"status,omitempty"`
}

// CRDVersionPolicyList is a list of CRDVersionPolicy.
//
// +kubebuilder:object:root=true
type CRDVersionPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CRDVersionPolicy `json:"items"`
}

// Done is how many objects of the run are done: rewritten, skipped or
// failed. Progress shows it over Listed.
func (m *MigrationStatus) Done() int64 { return m.Rewritten + m.Skipped + m.Failed }
