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

package space

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// Inputs are what a writer's budget is set from.
type Inputs struct {
	// Quota is etcd's quota as told (migration.Options.EtcdQuota); 0 when
	// not told.
	Quota int64
	// Previous is what the runs before this one left
	// (migration.Options.Previous).
	Previous Ledger
	// Metrics reads the API server's /metrics, for the database's size;
	// nil when there is no client to read it with.
	Metrics func(context.Context) ([]byte, error)
	// Fixed, when not 0, is the budget instead of the rule's: above 0 the
	// bytes per compaction, below 0 none (measurements only: a big
	// population of big objects can then fill etcd).
	Fixed int64
	// Pool is the budget every writer to the same etcd shares (PoolFor);
	// nil: the writer's own. A fixed budget is always its own.
	Pool *Pool
}

// New is the budget of the inputs, its reason and the database's size it
// read (0 when unknown); compacted tells whether etcd compacted past a
// resourceVersion.
func (in Inputs) New(ctx context.Context, compacted func(context.Context, string) (bool, error), resource string) (*Budget, string, int64) {
	s := &Budget{budget: in.Fixed, compacted: compacted, started: time.Now()}
	switch {
	case s.budget < 0:
		return s, "off", 0
	case s.budget > 0:
		s.ledger.InUse = in.Previous.InUse
		s.inherit(in.Previous)
		return s, fmt.Sprintf("%s per compaction, as set", BytesText(s.budget)), 0
	}
	space, err := etcdSpace(ctx, in.Metrics, in.Quota)
	var reason string
	if in.Pool != nil {
		var prev Ledger
		s.budget, reason, prev = in.Pool.join(ctx, func(prev Ledger) (int64, string, int64) {
			at := space
			at.Previous = prev
			budget, reason := BudgetFor(at)
			return budget, reason, prev.inUse(space.DatabaseSize)
		}, in.Previous)
		s.pool = in.Pool
		s.ledger.InUse = prev.InUse
		s.inherit(prev)
	} else {
		space.Previous = in.Previous
		s.budget, reason = BudgetFor(space)
		s.ledger.InUse = in.Previous.inUse(space.DatabaseSize)
		s.inherit(in.Previous)
	}
	if s.budget > 0 && space.DatabaseSize > 0 {
		s.watch = newFileWatch(space.DatabaseSize, s.ledger.InUse, s.budget, in.Quota)
		s.fileSize = fileSizeReader(in.Metrics)
	}
	if err != nil {
		text := err.Error()
		if len(text) > maxReasonError {
			text = text[:maxReasonError] + "..."
		}
		reason += "; etcd's database size is unknown: " + text
		klog.FromContext(ctx).Info("the etcd space budget cannot read the database's size; a conservative budget applies",
			"resource", resource, "budget", BytesText(s.budget), "err", err.Error())
	}
	if space.SizeUnreported {
		klog.FromContext(ctx).Info("the API server reports no storage size: the etcd space budget is "+reason, "resource", resource)
	}
	return s, reason, space.DatabaseSize
}

// fileSizeReader reads etcd's file size from /metrics (0 when it carries
// none).
func fileSizeReader(metrics func(context.Context) ([]byte, error)) func(context.Context) (int64, error) {
	if metrics == nil {
		return nil
	}
	return func(ctx context.Context) (int64, error) {
		data, err := metrics(ctx)
		if err != nil {
			return 0, err
		}
		size, _ := parseStorageSize(data)
		return size, nil
	}
}

// storageSizeReads is how many times a /metrics without the storage size
// is read before the size counts as unreported, storageSizeRetry apart:
// the API server asks etcd for it at each scrape, within a second, so a
// loaded etcd can miss one. A variable for the tests.
var storageSizeReads, storageSizeRetry = 3, time.Second

// etcdSpace reads the etcd database's size from the API server; the error
// says why it is unknown (not when the storage reports none).
func etcdSpace(ctx context.Context, metrics func(context.Context) ([]byte, error), quota int64) (Etcd, error) {
	space := Etcd{Quota: quota}
	if metrics == nil {
		return space, fmt.Errorf("no rest.Config (migration.Options.Config) to read the API server's /metrics with")
	}
	for read := 1; ; read++ {
		data, err := metrics(ctx)
		if err != nil {
			return space, fmt.Errorf("read the API server's /metrics (the chart grants get on it): %w", err)
		}
		if size, ok := parseStorageSize(data); ok {
			space.DatabaseSize = size
			return space, nil
		}
		if read == storageSizeReads {
			space.SizeUnreported = true
			return space, nil
		}
		if err := sleep(ctx, storageSizeRetry); err != nil {
			return space, err
		}
	}
}

// parseStorageSize finds the API server's storage size gauge in its
// /metrics text; with several etcd clusters (events apart, say) it takes the
// largest, which holds the custom resources or is the one to worry about.
func parseStorageSize(metrics []byte) (int64, bool) {
	var size float64
	found := false
	scanner := bufio.NewScanner(bytes.NewReader(metrics))
	scanner.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		rest, ok := strings.CutPrefix(line, storageSizeMetric)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil && v >= size {
			size, found = v, true
		}
	}
	return int64(size), found && size > 0
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// maxReasonError bounds the error quoted in a budget's reason (migration.Progress.SpaceBudgetReason), which a
// policy's status carries (512 characters at most).
const maxReasonError = 200
