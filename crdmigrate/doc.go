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

// Package crdmigrate graduates an operator's own CRDs from inside the
// operator. Add it to the controller-runtime Manager your operator already
// runs, name the CRDs you ship (or their API groups), and whenever one of
// them stores more versions than its storage version (a new release flipped
// `storage: true`, status.storedVersions still lists the old version), the
// controller rewrites every object in the storage version and prunes
// status.storedVersions, so that the next release may drop the old version.
//
// It is Graduator's operator without the CRDVersionPolicy: each selected
// CRD is graduated by the operator's driver (package driver) as a
// GitOps-mode policy, so the steps, their order and their guards are the
// operator's. Before it writes anything it asks the API server with
// SelfSubjectAccessReviews whether it may do all the graduation takes (a
// denial names the RBAC rules to add), waits until API discovery advertises
// the new storage version and a settle delay has passed, and reads and
// dry-run writes a sample of objects at the storage version (exercising the
// conversion webhook and admission). Then it runs the migration engine of
// package migration (paged, adaptive, polite by default) with its
// invariant: an object counts as migrated only when the API server
// acknowledged a write of it, a read proved it gone, or it was written
// after the checkpoint; a catch-up sweep rewrites the objects written while
// the run went on. It prunes status.storedVersions only after a complete
// run with no failed object, for the CRD generation it ran on, under an
// optimistic lock.
//
// # State
//
// The graduation's state (the run's checkpoint, continue token and counts,
// the phase, the conditions and the retries) is kept as JSON in the
// annotation graduator.io/graduation on the CRD itself (driver.CRDStore),
// written under an optimistic lock after each page of the migration. A
// manager restarted mid-run (a rollout, an eviction, an OOM kill) resumes
// from the last saved page: objects written since the checkpoint are skipped
// without a write, and the catch-up sweep skips the objects the run wrote
// itself before the restart. Deleting the annotation starts the next run
// over, which is safe.
//
// # Reporting
//
// The controller reports with Events on the CRD itself (events.k8s.io/v1,
// `kubectl events --for crd/NAME`), not with conditions: a CRD's status
// conditions belong to the API server's own controllers, and Events need
// only the right to create them. Reasons: MigrationStarted,
// MigrationCompleted, MigrationFailed, StoredVersionsPruned, and, for a
// step that fails and is retried with backoff (5 s doubling to 5 min), the
// stall reason of the operator: ConversionFailed, APIUnavailable,
// Forbidden, DiscoveryFailed, Conflict, StepFailed, or PreflightFailed
// (see package graduation). A stalled step keeps the progress of the run:
// once the cause is gone, the run resumes where it stopped.
//
// Metrics go to controller-runtime's registry (served by the manager's
// metrics endpoint), under the operator's names: graduator_objects_rewritten_total,
// graduator_objects_skipped_total, graduator_objects_failed_total,
// graduator_migration_duration_seconds, graduator_migration_writers,
// graduator_migrations_running, graduator_migration_progress_ratio and
// graduator_step_errors_total, each labelled with the CRD's name.
//
// # RBAC
//
// The controller needs, besides its manager's own rights:
//
//	// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch;patch
//	// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions/status,verbs=patch
//	// +kubebuilder:rbac:groups=authorization.k8s.io,resources=selfsubjectaccessreviews,verbs=create
//	// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
//	// +kubebuilder:rbac:groups=YOUR.GROUP,resources=*,verbs=get;list;patch
//	// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get,resourceNames=kubernetes
//	// +kubebuilder:rbac:groups="",resources=endpoints,verbs=get,resourceNames=kubernetes
//	// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=list,namespace=kube-system
//
// The last three let it ask every API server whether it serves the new
// storage version before a run's first write and before the prune: one by
// one at the addresses the EndpointSlice lists, or, where those cannot be
// dialled, through the manager's own address as often as the servers'
// number (their identity Leases in kube-system) takes; without them the
// settle delay stands for that check, and the graduation says so. The first (without patch) and third are what it runs on; the others it
// checks with SelfSubjectAccessReviews before it writes anything (patch on
// customresourcedefinitions is for its state annotation), and a missing one
// stalls the graduation of that CRD before anything is written, as any
// failed step does: one Forbidden Event (or, when Events are what is
// missing, a log line) names every rule to add, and the check is retried
// with the same backoff. While the right to patch the CRD is missing, that
// stall's state is held in the controller's memory instead of the
// annotation.
//
// Add works on a manager built with client-go's default scheme: it adds
// apiextensions.k8s.io/v1 to the manager's scheme when it is missing. An operator usually holds the last one already,
// for its own objects.
//
// The controller runs on the leader only, like every controller of a
// manager with leader election. It watches CRDs as metadata only, so the
// manager's memory does not grow with the size of the CRDs' schemas, and
// reads a CRD from the API server when it acts on it.
package crdmigrate
