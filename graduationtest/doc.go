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

// Package graduationtest rehearses a CRD upgrade in an envtest suite: the
// proof, before a release, that objects created at the old version survive
// the new CRD, the storage migration, the pruning of
// status.storedVersions and the removal of the old version, intact at
// every served version.
//
// A rehearsal walks a CRD through its life as a cluster would see it:
//
//	r := graduationtest.New(t, testEnv, graduationtest.Options{})
//	r.InstallFiles(ctx, "testdata/v1")                  // stage 1: v1 only
//	r.Create(ctx, objectsAtV1...)                       // objects stored as v1
//	r.InstallFiles(ctx, "testdata/v1-v2")               // stage 2: v2 added, conversion webhook
//	snap := r.Snapshot(ctx, "widgets.example.com")      // every object at every served version
//	r.Graduate(ctx, "widgets.example.com", "v2")        // flip storage, migrate, prune
//	r.Verify(ctx, snap)                                 // nothing changed, at any version
//	err := r.ApplyStageFiles(ctx, "testdata/v2")        // stage 3: v1 dropped; nil when accepted
//
// Each method fails the test (through TB, which *testing.T and Ginkgo's
// GinkgoT() both satisfy) with a sentence a person can act on: "3 objects
// still stored as example.com/v1 when storedVersions was pruned",
// or every changed object and field with its JSON path at the version that
// shows it: `v1: default/w-1: changed /spec/color: "red" -> (absent)`.
// The Try forms return errors instead, for specs that expect a failure.
//
// Graduate runs what the Graduator operator and the crdmigrate controller
// run: the preflight (a sample read and dry-run write at the new version),
// the migration engine of package migration with its invariant and catch-up
// sweep, and PruneStoredVersions, which refuses after a partial run. What
// etcd holds is read from the envtest control plane's etcd (EtcdStore), not
// through the API server, which converts: the report says which version
// each object is stored in, before and after.
package graduationtest
