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

package migration

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/paging"
)

// WriteTarget says where the no-op writes go. It is the policy's
// spec.migration.writeTo type itself, so the operator passes it on as it is.
type WriteTarget = graduatorv1alpha1.WriteTarget

const (
	// WriteToObject patches the object itself.
	WriteToObject = graduatorv1alpha1.WriteToObject
	// WriteToStatus patches the /status subresource, for CRDs whose
	// admission webhooks reject no-op writes to the object.
	WriteToStatus = graduatorv1alpha1.WriteToStatus
)

// Defaults for zero Options fields.
const (
	// DefaultConcurrency is the upper bound of the adaptive writer limit.
	DefaultConcurrency = 64
	// DefaultPageSize is the engine's page: each LIST of its passes and the
	// batch its writers take. Not paging.DefaultPageSize: the pass's page
	// size sets how far its listing runs ahead of its writes and how often
	// it saves a checkpoint, and larger pages were measured for reads only
	// (docs/benchmarks.md, "Reads as N grows").
	DefaultPageSize    = 500
	DefaultMaxFailures = graduatorv1alpha1.MaxFailuresKept
	// maxListRestarts bounds how often an expired continue token restarts
	// the listing in one run (paging's rule).
	maxListRestarts = paging.MaxRestarts
	// pagesInFlight bounds the pages listed but not yet done: memory holds
	// at most this many pages of metadata.
	pagesInFlight = 3
	// pageObjectsPerWriter and minPageSize size a page by the writers the
	// limit allows, pageOfRemaining by the objects left (runner.pageSize):
	// 32 writers and more take PageSize's 500, one writer 50 while fewer
	// than 10,000 objects are left.
	pageObjectsPerWriter, minPageSize, pageOfRemaining = 16, 50, 200
)

// Options configure a Run.
type Options struct {
	// Resource is the group, version and plural to migrate. The version is
	// the one objects are read and written at; any served version works, the
	// storage version avoids conversions.
	Resource schema.GroupVersionResource
	// Config, when set, is what the engine builds its own client from: a
	// metadata client (only namespace, name, uid and resourceVersion travel,
	// whatever the size of the objects) whose transport tells the adaptive
	// limit at once when the API server throttles. Preferred; when nil the
	// dynamic client given to Run lists, reads and writes.
	Config *rest.Config
	// Concurrency is the upper bound on writers in flight; the limit adapts
	// below it (DefaultConcurrency when 0).
	Concurrency int
	// Priority is how much of the API server the adaptive limit takes:
	// PriorityBackground (when empty) keeps other clients' write rate at
	// BackgroundKept or more of their rate alone, PriorityFull takes the
	// server's full speed.
	Priority Priority
	// PageSize is the LIST limit: the most objects a page holds. While the
	// adaptive limit allows few writers, the pass lists fewer at a time
	// (16 a writer, at least 50 and a 200th of the objects left), so that
	// a page's LIST is no longer a stall for the other clients than the
	// writes it feeds.
	PageSize int64
	// QPS, when above 0, caps writes per second. None by default: API
	// Priority and Fairness protects the API server, and the adaptive limit
	// backs off when it says so.
	QPS float32
	// WriteTo is where the no-op writes go; WriteToObject when empty.
	WriteTo WriteTarget
	// WriteVersions are other served versions a main pass write may go to:
	// an object whose every managedFields entry was recorded at one of them
	// is written there, which spares the API server the conversions its
	// field manager makes for entries at another version than the
	// request's (through a conversion webhook, most of a write's cost).
	// The API server stores the object in the storage version whatever the
	// request's. Name only versions objects are stored in whose round trip
	// through the storage version was proven (the write converts as the
	// proof's dry run does), and only with a conversion webhook: with
	// strategy None nothing is gained and the old version's schema prunes.
	// Empty: every write goes to Resource's version.
	WriteVersions []string
	// Resume is the progress of an earlier run to continue: its counts, its
	// continue token and its Checkpoint. The zero value starts from the
	// beginning. A fresh run can set only Resume.Checkpoint and
	// Resume.Written: a resourceVersion taken after the storage version
	// switched and settled, so that objects with a newer resourceVersion
	// (written since) are skipped without a write, and the resourceVersions
	// an earlier run's writes left (a retry after failures), so that the
	// objects still at one of them are skipped too. Without a checkpoint,
	// the first LIST's resourceVersion is taken (and reported in Progress).
	Resume Progress
	// MaxFailures bounds Progress.Failures (DefaultMaxFailures when 0).
	MaxFailures int
	// SweepWatchLimit bounds the objects written by others during the run
	// that the catch-up sweep's watch keeps (DefaultSweepWatchLimit when
	// 0). Past it, the sweep lists every object again instead. Below 0
	// there is no watch and the sweep always lists.
	SweepWatchLimit int
	// EtcdQuota is etcd's space quota in bytes (its --quota-backend-bytes;
	// 2 GiB unless set), when known: the etcd space budget then lets the
	// database grow to 3/4 of it (docs/design.md, "The budgets"). 0 when
	// not told: etcd's default (DefaultEtcdQuota) is assumed, so a cluster
	// that lowered its quota must tell it.
	EtcdQuota int64
	// Previous is what the runs before this one in the same etcd left of
	// their writes (Progress.Space of the last of them): a run resumed after
	// a restart, the managedFields cleanup after its migration, the next
	// CRD of a fleet. The budget then counts the pages their writes freed
	// as free, and charges their writes not compacted yet.
	// Zero: none known, and the budget reads the database's file alone.
	Previous SpaceLedger
	// OnProgress is called, never concurrently, each time the oldest pages
	// in flight are done, so persisting Progress.Continue and
	// Progress.Checkpoint is safe; when a wait for etcd's compaction starts
	// and ends; when the catch-up sweep starts; and once more at the end.
	OnProgress func(Progress)
	// OnObject, when set, is called as each object of the main pass is
	// rewritten, skipped or failed, before its page is done and possibly
	// concurrently: a live count for a progress bar. Progress is the count
	// to persist.
	OnObject func()
	// OnLimit, when set, is called each time the adaptive writer limit or
	// its reason changes, with the engine's write rate over the window
	// that decided it: a trace of the limit finer than the pages'. It is
	// called from the writer that closed the window, under the limiter's
	// lock, so it must return at once.
	OnLimit func(limit int, reason LimitReason, rate float64)
}

// Progress counts what a run did. Counts are cumulative, including those of
// the Options.Resume it started from, and cover done pages only.
type Progress struct {
	// Checkpoint is the checkpoint resourceVersion in use.
	Checkpoint string
	// Continue is where the next LIST starts; empty at the start and when
	// the listing is complete. During the catch-up sweep it is the sweep's.
	Continue string
	// CatchUp is true once the main pass is complete and the catch-up sweep
	// runs.
	CatchUp bool
	// CatchUpCheckpoint is where the sweep's window ends: the revision its
	// watch was seen to reach, or its listing's resourceVersion. The sweep
	// rewrites objects others wrote between Checkpoint and it.
	CatchUpCheckpoint string
	// SweepMode says how the sweep found the objects others wrote, once it
	// started: SweepWatch (collected by a watch while the run went on) or
	// SweepList (read again by a LIST); SweepReason says why.
	SweepMode   SweepMode
	SweepReason string
	// Listed objects, Rewritten ones, Skipped ones (proven done without a
	// write of ours: deleted or replaced meanwhile, or written after the
	// checkpoint) and Failed ones, in the main pass.
	Listed, Rewritten, Skipped, Failed int64
	// Remaining is the API server's estimate of the objects not listed yet
	// (remainingItemCount; 0 after the last page), -1 when unknown.
	Remaining int64
	// CaughtUp counts the objects the catch-up sweep found written during
	// the run and rewrote (or proved done).
	CaughtUp int64
	// Writers is the adaptive limit on writes in flight when reported.
	Writers int
	// WritersReason says what the limit is doing: stepping up, holding,
	// backing off after a throttle, yielding to other clients, pausing to
	// measure them (or fixed).
	WritersReason LimitReason
	// WriteRate is the engine's writes per second over the last window the
	// limit was measured on (0 before the first).
	WriteRate float64
	// Failures names some of the failed objects, at most Options.MaxFailures.
	Failures []Failure
	// Written is the resourceVersions of the main pass's own acknowledged
	// writes, as ranges ("a-b,c"), at most a few hundred: a run resumed from
	// this progress (after a restart) knows them, so its catch-up sweep
	// does not write those objects again.
	Written string
	// SpaceBudget is the bytes the run may add to etcd between two
	// compactions (-1: off), and SpaceBudgetReason how it was set: from
	// which database size and quota, or why without them (no access to
	// the API server's /metrics, say).
	SpaceBudget       int64
	SpaceBudgetReason string
	// DatabaseSize is etcd's database size when the run started, from the
	// API server's apiserver_storage_size_bytes; 0 when unknown.
	DatabaseSize int64
	// CompactionWait, when not empty, says that the run waits for etcd's
	// next compaction, since when and why; empty while it writes.
	CompactionWait string
	// CompactionWaits counts the compactions the run waited for.
	CompactionWaits int
	// Space is what the run's writes did to etcd's space so far, for the
	// run that follows it (Options.Previous); zero with the budget off.
	Space SpaceLedger
}

// Failure is an object the run could not rewrite.
type Failure struct {
	Namespace, Name string
	// Reason is the API server's error.
	Reason string
}

func (f Failure) String() string {
	return klog.KRef(f.Namespace, f.Name).String() + ": " + f.Reason
}

// Result is the outcome of a Run.
type Result struct {
	Progress
	// Complete is true when the main pass and the catch-up sweep reached the
	// end of their listings: every object was handled, and each one is
	// either done or counted in Failed.
	Complete bool
}

// ParseEtcdQuota reads an etcd quota given as a quantity, such as 8Gi or
// 2147483648, for Options.EtcdQuota; empty is 0 (unknown).
func ParseEtcdQuota(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("etcd quota %q: %w", s, err)
	}
	if q.Value() < 0 {
		return 0, fmt.Errorf("etcd quota %q is negative", s)
	}
	return q.Value(), nil
}

// writeAt is the version an object with these managedFields is written at,
// empty for Resource's (writeVersion).
func (o Options) writeAt(entries []metav1.ManagedFieldsEntry) string {
	if v := writeVersion(entries, o.WriteVersions, o.Resource.Version); v != o.Resource.Version {
		return v
	}
	return ""
}

func withDefaults(o Options) Options {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.WriteTo == "" {
		o.WriteTo = WriteToObject
	}
	if o.MaxFailures <= 0 {
		o.MaxFailures = DefaultMaxFailures
	}
	if o.SweepWatchLimit == 0 {
		o.SweepWatchLimit = DefaultSweepWatchLimit
	}
	return o
}
