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
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/graduator/graduator/internal/space"
)

// SpaceLedger is what a run's writes did to etcd's space (Progress.Space),
// kept for the run that follows it in the same etcd (Options.Previous).
// etcd's file keeps the pages a compaction freed until a defragmentation,
// and the API server's gauge is the file's size: after a run grew the file,
// the file alone says nothing of the pages its writes freed again. The
// ledger does. It is the etcd space budget's own ledger (internal/space).
type SpaceLedger struct {
	// InUse is the part of etcd's database the run's budget counted as in
	// use when it started: the file's size, or less when it followed runs
	// whose writes were compacted since.
	InUse int64
	// Peak is the most bytes that the run's writes, and those of the runs
	// before it in a row, held at once before a compaction freed them.
	Peak int64
	// Outstanding is the bytes of the run's writes not known to be
	// compacted when it last reported, and Revision the highest revision
	// its writes were given: a run that follows holds those bytes until
	// etcd compacted past Revision.
	Outstanding int64
	Revision    uint64
}

// DefaultEtcdQuota is etcd's own default space quota (its
// --quota-backend-bytes when not set): 2 GiB, assumed when
// Options.EtcdQuota is not told.
const DefaultEtcdQuota int64 = space.DefaultQuota

// reserveSpace is Reserve for the run's writer w, the wait shown in the
// progress. Only the dispatcher calls it.
func (r *runner) reserveSpace(ctx context.Context, w space.Writer) (*space.Chunk, error) {
	return r.space.Reserve(ctx, w, func(rev string) { r.startWait(ctx, rev) }, func() {
		r.mu.Lock()
		r.progress.CompactionWait = ""
		r.mu.Unlock()
		r.notify()
		r.writers.RestartWindow()
	})
}

// startWait shows in the progress that the run waits for a compaction.
func (r *runner) startWait(ctx context.Context, rev string) {
	r.mu.Lock()
	r.progress.CompactionWaits++
	r.progress.CompactionWait = fmt.Sprintf("waiting for etcd's next compaction past resourceVersion %s since %s: the run's writes not compacted yet reached its budget of %s%s%s",
		rev, time.Now().UTC().Format(time.RFC3339), space.BytesText(r.space.Current()), r.space.Outlook(r.progress.Remaining), r.quotaHint())
	r.mu.Unlock()
	klog.FromContext(ctx).Info("waiting for etcd to compact", "resource", r.opts.Resource.String(), "resourceVersion", rev, "budget", space.BytesText(r.space.Current()))
	r.notify()
}

// quotaHint is what a wait adds when etcd's quota was not told: telling
// it can lift the wait, and where to tell it.
func (r *runner) quotaHint() string {
	if r.opts.EtcdQuota > 0 {
		return ""
	}
	setting := r.hook.QuotaSetting
	if setting == "" {
		setting = "Options.EtcdQuota"
	}
	if r.progress.DatabaseSize > 0 {
		return fmt.Sprintf("; etcd's quota is not told, so its default %s is assumed: if the quota is larger, tell it with %s to raise the budget",
			space.BytesText(DefaultEtcdQuota), setting)
	}
	return fmt.Sprintf("; etcd's database size is unknown and its quota not told: tell the quota with %s to raise the budget", setting)
}

// newSpaceBudget sets the run's budget from the rule (internal/space),
// reading the database's size from the API server's /metrics, or as the
// hook fixes it.
func (r *runner) newSpaceBudget(ctx context.Context) {
	in := space.Inputs{Quota: r.opts.EtcdQuota, Previous: space.Ledger(r.opts.Previous), Metrics: r.metrics, Fixed: r.hook.SpaceBudget,
		Pool: spacePool(r.opts.Config)}
	r.space, r.progress.SpaceBudgetReason, r.progress.DatabaseSize = in.New(ctx, r.objects.compacted, r.opts.Resource.String())
	r.progress.SpaceBudget = r.space.Current()
	r.space.OnRebudget(func(reason string) {
		r.mu.Lock()
		r.progress.SpaceBudget, r.progress.SpaceBudgetReason = r.space.Current(), reason
		r.mu.Unlock()
		r.notify()
	})
}

// spacePool is the budget every writer of this process to the etcd behind
// cfg shares, with its ledger on a Lease in the cluster (space.LeaseStore);
// nil without a rest.Config, which names no etcd to share: the writer's
// budget is then its own.
func spacePool(cfg *rest.Config) *space.Pool {
	if cfg == nil {
		return nil
	}
	return space.PoolFor(cfg.Host, func() space.Store { return space.NewLeaseStore(cfg) })
}
