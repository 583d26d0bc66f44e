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
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/klog/v2"
)

// Store keeps one etcd's Shared ledger in the cluster.
type Store interface {
	// Load reads the ledger and its version ("" when there is none yet).
	Load(ctx context.Context) (Shared, string, error)
	// Save writes it over version ("" creates it); it answers a conflict
	// (apierrors.IsConflict) when another process wrote it since.
	Save(ctx context.Context, sh Shared, version string) error
}

// Pool is one etcd's budget as every writer of this process shares it:
// a migration's pass and sweep, the managedFields cleanup, the next CRD of
// a fleet, prepare's CRDs, and any of them at the same time. Their bytes
// not compacted yet are held under one budget; with a Store, the process
// holds only its part of the etcd's budget (shareOf), which it renews
// while it writes. PoolFor finds the pool of an etcd.
type Pool struct {
	id    string
	store Store // nil: the budget is this process's alone

	// sync serializes the ledger's reads and writes in the cluster.
	sync sync.Mutex

	mu      sync.Mutex
	members int
	budget  int64 // the etcd's budget, set when the first member joined
	reason  string
	// share is the part of budget this process may hold; shareReason why
	// ("" when alone). Without a store it is the budget.
	share       int64
	shareReason string
	// outstanding is every member's bytes not compacted yet, and leftover
	// those of members that left while others wrote (freed once etcd
	// compacted past their revision).
	outstanding int64
	leftover    Ledger
	revision    uint64
	peak        int64
	// chain is what the last member to leave handed on, without a store.
	chain    Ledger
	lastSync time.Time
	stop     context.CancelFunc
}

// syncEvery is how often a writing process renews its part of the budget
// in the cluster: a process that joins waits at most that long for the
// others to give back their equal parts. A variable for the tests.
var syncEvery = 2 * time.Second

var pools = struct {
	sync.Mutex
	m map[string]*Pool
}{m: map[string]*Pool{}}

// processID names this process in the ledger.
var processID = func() string {
	host, _ := os.Hostname()
	return host + "/" + strconv.Itoa(os.Getpid()) + "/" + rand.String(5)
}()

// PoolFor is the pool of the etcd behind key (the API server's address),
// made with the store newStore gives (nil: none) when this process has none
// yet.
func PoolFor(key string, newStore func() Store) *Pool {
	pools.Lock()
	defer pools.Unlock()
	if p, ok := pools.m[key]; ok {
		return p
	}
	p := &Pool{id: processID}
	if newStore != nil {
		p.store = newStore()
	}
	pools.m[key] = p
	return p
}

// NewPool is a pool of its own, with store (nil: none), for the tests.
func NewPool(id string, store Store) *Pool { return &Pool{id: id, store: store} }

// rule is the budget BudgetFor sets after prev, its reason, and the part
// of the database it counts in use.
type rule func(prev Ledger) (budget int64, reason string, inUse int64)

// join adds a member: the first sets the etcd's budget by rule (after the
// ledger the cluster keeps, or own when it keeps none); one that joins
// others takes the budget they share. It returns the budget, its reason,
// and what the member follows (InUse and Peak of the row, and the bytes
// it takes over not compacted yet).
func (p *Pool) join(ctx context.Context, set rule, own Ledger) (int64, string, Ledger) {
	if p.store != nil {
		if budget, reason, prev, err := p.joinShared(ctx, set, own); err == nil {
			return budget, reason, prev
		} else {
			p.dropStore(ctx, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.members++
	if p.members > 1 {
		return p.budget, p.sharedReason(), Ledger{InUse: p.chain.InUse, Peak: p.peak}
	}
	prev := p.chain
	if prev == (Ledger{}) {
		prev = own
	}
	budget, reason, inUse := set(prev)
	p.budget, p.reason, p.share, p.shareReason = budget, reason, budget, ""
	p.chain = Ledger{InUse: inUse, Peak: prev.Peak}
	p.peak, p.outstanding, p.revision, p.leftover = prev.Peak, 0, 0, Ledger{}
	return budget, reason, Ledger{InUse: inUse, Peak: prev.Peak, Outstanding: prev.Outstanding, Revision: prev.Revision}
}

// sharedReason is the reason of a member that joined others; p.mu held.
func (p *Pool) sharedReason() string {
	r := p.reason + fmt.Sprintf("; shared by the %d writers of this process", p.members)
	if p.shareReason != "" {
		r += "; " + p.shareReason
	}
	return r
}

// joinShared is join with the ledger in the cluster.
func (p *Pool) joinShared(ctx context.Context, set rule, own Ledger) (int64, string, Ledger, error) {
	p.sync.Lock()
	defer p.sync.Unlock()
	for {
		sh, version, err := p.store.Load(ctx)
		if err != nil {
			return 0, "", Ledger{}, err
		}
		now := time.Now()
		sh.expire(p.id, now)
		p.mu.Lock()
		members := p.members
		part := Part{Outstanding: p.outstanding, Revision: p.revision}
		p.mu.Unlock()
		_, mine := sh.Writers[p.id]
		first := len(sh.Writers) == 0 || (len(sh.Writers) == 1 && mine && members == 0)
		var prev Ledger
		if first {
			prev = sh.Chain
			if prev == (Ledger{}) {
				prev = own
			}
			budget, reason, inUse := set(prev)
			sh.Budget, sh.Reason = budget, reason
			sh.Chain = Ledger{InUse: inUse, Peak: prev.Peak}
			prev.InUse = inUse
		} else {
			prev = Ledger{InUse: sh.Chain.InUse, Peak: sh.Chain.Peak, Outstanding: sh.Chain.Outstanding, Revision: sh.Chain.Revision}
			sh.Chain.Outstanding, sh.Chain.Revision = 0, 0
		}
		// The bytes taken over are this process's now, charged until
		// compacted.
		part.Outstanding += prev.Outstanding
		part.Revision = max(part.Revision, prev.Revision)
		next, share, shareReason := shareOf(sh, p.id, part, now)
		if err := p.store.Save(ctx, next, version); apierrors.IsConflict(err) {
			continue
		} else if err != nil {
			return 0, "", Ledger{}, err
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.members++
		p.budget, p.reason, p.share, p.shareReason, p.lastSync = sh.Budget, sh.Reason, share, shareReason, now
		p.chain = sh.Chain
		if members == 0 {
			p.peak, p.outstanding, p.revision, p.leftover = prev.Peak, 0, 0, Ledger{}
		}
		if p.stop == nil {
			hb, stop := context.WithCancel(context.WithoutCancel(ctx))
			p.stop = stop
			go p.heartbeat(hb)
		}
		reason := sh.Reason
		if !first {
			reason += "; the budget of the writers already writing to this etcd, set when the first of them started"
		}
		if p.members > 1 {
			reason += fmt.Sprintf("; shared by the %d writers of this process", p.members)
		}
		if shareReason != "" {
			reason += "; " + shareReason
		}
		return sh.Budget, reason, prev, nil
	}
}

// dropStore goes on without the ledger in the cluster after err: the
// budget is then this process's alone, as before there was a ledger.
func (p *Pool) dropStore(ctx context.Context, err error) {
	klog.FromContext(ctx).Info("the etcd space ledger in the cluster cannot be read or written; this process's writers share a budget of their own, which does not count other processes' writes", "err", err.Error())
	p.sync.Lock()
	p.store = nil
	p.sync.Unlock()
}

// heartbeat renews the process's part while it has members.
func (p *Pool) heartbeat(ctx context.Context) {
	t := time.NewTicker(PartTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.renew(ctx, true)
		}
	}
}

// renew writes the process's part in the cluster and takes the part the
// ledger gives it (shareOf), when due (or force); the bytes of writers
// that died or left are taken over, to be freed once compacted.
func (p *Pool) renew(ctx context.Context, force bool) {
	p.mu.Lock()
	due := p.store != nil && (force || time.Since(p.lastSync) >= syncEvery)
	if due {
		p.lastSync = time.Now()
	}
	p.mu.Unlock()
	if !due {
		return
	}
	p.sync.Lock()
	defer p.sync.Unlock()
	if p.store == nil {
		return
	}
	for {
		sh, version, err := p.store.Load(ctx)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("cannot read the etcd space ledger; the part last read holds", "err", err.Error())
			return
		}
		now := time.Now()
		sh.expire(p.id, now)
		took := Ledger{Outstanding: sh.Chain.Outstanding, Revision: sh.Chain.Revision}
		sh.Chain.Outstanding, sh.Chain.Revision = 0, 0
		p.mu.Lock()
		if p.members == 0 {
			p.mu.Unlock()
			return
		}
		part := Part{Outstanding: p.outstanding + took.Outstanding, Revision: max(p.revision, took.Revision)}
		p.mu.Unlock()
		next, share, reason := shareOf(sh, p.id, part, now)
		if err := p.store.Save(ctx, next, version); apierrors.IsConflict(err) {
			continue
		} else if err != nil {
			klog.FromContext(ctx).V(2).Info("cannot write the etcd space ledger; the part last read holds", "err", err.Error())
			return
		}
		p.mu.Lock()
		p.share, p.shareReason = share, reason
		if took.Outstanding > 0 {
			p.outstanding += took.Outstanding
			p.leftover.Outstanding += took.Outstanding
			p.leftover.Revision = max(p.leftover.Revision, took.Revision)
		}
		p.mu.Unlock()
		return
	}
}

// limit is what the process's members together may hold now.
func (p *Pool) limit() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.share
}

// add counts n more bytes held (less, below 0) and the revision they were
// given.
func (p *Pool) add(n int64, rev uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.outstanding += n
	p.revision = max(p.revision, rev)
	p.peak = max(p.peak, p.outstanding)
}

// held is every member's bytes not compacted yet.
func (p *Pool) held() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.outstanding
}

// freeLeftover frees the bytes of members that left (or of processes that
// died) once etcd compacted past them.
func (p *Pool) freeLeftover(ctx context.Context, compacted func(context.Context, string) (bool, error)) {
	p.mu.Lock()
	left := p.leftover
	p.mu.Unlock()
	if left.Outstanding <= 0 || left.Revision == 0 {
		return
	}
	if ok, err := compacted(ctx, strconv.FormatUint(left.Revision, 10)); err != nil || !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.leftover == left {
		p.outstanding -= left.Outstanding
		p.leftover = Ledger{}
	}
}

// leave ends a member whose bytes not compacted yet are outstanding
// (after rev): the last one hands everything on, in the cluster too.
func (p *Pool) leave(ctx context.Context, outstanding int64, rev uint64) {
	p.mu.Lock()
	p.members--
	if p.members > 0 {
		p.leftover.Outstanding += outstanding
		p.leftover.Revision = max(p.leftover.Revision, rev)
		p.mu.Unlock()
		return
	}
	handed := Ledger{InUse: p.chain.InUse, Peak: p.peak, Outstanding: p.outstanding, Revision: max(p.revision, p.leftover.Revision, rev)}
	if handed.Outstanding <= 0 {
		handed.Outstanding, handed.Revision = 0, 0
	}
	p.chain = handed
	p.outstanding, p.leftover = 0, Ledger{}
	stop := p.stop
	p.stop = nil
	p.mu.Unlock()
	if stop != nil {
		stop()
	}
	p.sync.Lock()
	defer p.sync.Unlock()
	if p.store == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	for {
		sh, version, err := p.store.Load(ctx)
		if err != nil {
			klog.FromContext(ctx).Info("cannot hand on the etcd space ledger; the next writer counts this one's part until it expires", "err", err.Error())
			return
		}
		p.mu.Lock()
		if p.members > 0 { // a member joined meanwhile: it renews the part
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		next := leave(sh, p.id, Part{Outstanding: handed.Outstanding, Revision: handed.Revision}, handed.Peak)
		if err := p.store.Save(ctx, next, version); apierrors.IsConflict(err) {
			continue
		} else if err != nil {
			klog.FromContext(ctx).Info("cannot hand on the etcd space ledger; the next writer counts this one's part until it expires", "err", err.Error())
		}
		return
	}
}

// shared tells whether the budget is split with other writers: other
// members in this process or other processes.
func (p *Pool) shared() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.members > 1 || p.shareReason != ""
}
