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
// It is Graduator's operator without the CRDVersionPolicy: the same steps
// in the same order, the same code. Before it writes anything it waits
// until API discovery advertises the new storage version and a settle
// delay has passed, asks the API server with SelfSubjectAccessReviews
// whether it may list, get and patch the objects and patch the CRD's
// status (a denial names the RBAC rule to add), and reads and dry-run
// writes a sample of objects at the storage version (exercising the
// conversion webhook and admission). Then it runs the migration engine of
// package migration (paged, adaptive, polite by default) with its
// invariant: an object counts as migrated only when the API server
// acknowledged a write of it, a read proved it gone, or it was written
// after the checkpoint; a catch-up sweep rewrites the objects written while
// the run went on. It prunes status.storedVersions only after a complete
// run with no failed object, for the CRD generation it ran on, under an
// optimistic lock.
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
//	// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
//	// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions/status,verbs=patch
//	// +kubebuilder:rbac:groups=authorization.k8s.io,resources=selfsubjectaccessreviews,verbs=create
//	// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
//	// +kubebuilder:rbac:groups=YOUR.GROUP,resources=*,verbs=get;list;patch
//
// The first and third are what it runs on; the others it checks with
// SelfSubjectAccessReviews before each migration starts, and a missing one
// stops the graduation of that CRD before anything is written, with a
// Forbidden Event (or, when Events are what is missing, a log line) that
// names the rule to add. An operator usually holds the last one already,
// for its own objects.
//
// The controller runs on the leader only, like every controller of a
// manager with leader election. It watches CRDs as metadata only, so the
// manager's memory does not grow with the size of the CRDs' schemas, and
// reads a CRD from the API server when it acts on it.
package crdmigrate
