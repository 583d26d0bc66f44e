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

// Package enginehook carries, in a context, what the engine's callers in
// this module tell migration.Run and migration.CleanupManagedFieldsWithin
// that no user of the migration package sets: the bench's and the suites'
// measurement knobs, and the words a door names its quota setting with. It
// keeps them out of migration.Options, whose every field is a promise.
package enginehook

import (
	"context"

	"github.com/graduator/graduator/internal/space"
)

// Hook is what a caller in this module tells the engine besides its
// Options.
type Hook struct {
	// FixedConcurrency keeps Options.Concurrency writers in flight instead
	// of adapting (measurements).
	FixedConcurrency bool
	// SpaceBudget, when not 0, is the etcd space budget instead of the
	// rule's: above 0 the bytes per compaction, below 0 none (measurements
	// only: a big population of big objects can then fill etcd).
	SpaceBudget int64
	// QuotaSetting names, for people, where the door that runs the
	// migration tells etcd's quota (a flag, a field): a wait for a
	// compaction with the quota not told says it. "Options.EtcdQuota" when
	// empty.
	QuotaSetting string
	// OnCharged, when set, is told at the end of a run or a cleanup what
	// each of its writers charged to the space budget (not with the budget
	// off).
	OnCharged func(map[space.Writer]space.Charge)
}

type key struct{}

// With returns ctx carrying h.
func With(ctx context.Context, h Hook) context.Context { return context.WithValue(ctx, key{}, h) }

// From is the hook ctx carries; the zero Hook when none.
func From(ctx context.Context) Hook {
	h, _ := ctx.Value(key{}).(Hook)
	return h
}
