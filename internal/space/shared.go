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
	"fmt"
	"time"
)

// Shared is the ledger of one etcd that every process writing to it keeps
// in the cluster (LeaseStore): the budget of the etcd, what the writers
// that left it handed on, and each live process's part of the budget.
// Every process reads it before it writes more and writes it back with
// optimistic concurrency, so the parts never add up to more than the
// budget, whoever writes at the same time.
type Shared struct {
	// Budget is the etcd's budget, set by the rule (BudgetFor) when the
	// first writer of a row of them started: the bytes all writers
	// together may hold that no compaction freed yet. A writer that joins
	// others takes its part of it; it does not set a budget of its own
	// from a file their writes grew. Reason is the rule's.
	Budget int64  `json:"budget"`
	Reason string `json:"reason,omitempty"`
	// Chain is what the writers before handed on (Ledger): InUse and Peak
	// of the row of writers, and, in Outstanding and Revision, the bytes
	// of writers that left, or died, that no compaction is known to have
	// freed yet. The next writer to join takes them over.
	Chain Ledger `json:"chain"`
	// Writers are the live processes' parts, by identity.
	Writers map[string]Part `json:"writers,omitempty"`
}

// Part is one process's part of the budget.
type Part struct {
	// Reserved is what the process may hold: never less than what it
	// holds (Outstanding).
	Reserved int64 `json:"reserved"`
	// Outstanding and Revision are the bytes of its writes that no
	// compaction is known to have freed, and the highest revision they
	// were given: what the next writer takes over if this one dies.
	Outstanding int64  `json:"outstanding"`
	Revision    uint64 `json:"revision,omitempty"`
	// Renewed is when the process last wrote its part; a part not renewed
	// within PartTTL is a writer that died.
	Renewed time.Time `json:"renewed"`
}

// PartTTL is how long a part not renewed stays: a live process renews it
// every third of it. A variable for the tests.
var PartTTL = 30 * time.Second

// expire drops the parts not renewed within PartTTL of now (not id's own),
// and hands their bytes not compacted yet on (Chain): they stay charged
// until etcd compacted past their revision. It returns how many it dropped.
func (sh *Shared) expire(id string, now time.Time) int {
	dropped := 0
	for w, p := range sh.Writers {
		if w == id || now.Sub(p.Renewed) < PartTTL {
			continue
		}
		sh.handOn(p)
		delete(sh.Writers, w)
		dropped++
	}
	return dropped
}

// handOn charges a part's bytes not compacted yet to the chain.
func (sh *Shared) handOn(p Part) {
	if p.Outstanding <= 0 {
		return
	}
	sh.Chain.Outstanding += p.Outstanding
	sh.Chain.Revision = max(sh.Chain.Revision, p.Revision)
	sh.Chain.Peak = max(sh.Chain.Peak, p.Outstanding)
}

// others is what the live parts other than id's reserve.
func (sh Shared) others(id string) int64 {
	var n int64
	for w, p := range sh.Writers {
		if w != id {
			n += max(p.Reserved, p.Outstanding)
		}
	}
	return n
}

// shareOf is the part of the budget that process id may hold, given what
// it holds now (own.Outstanding), and the ledger with its part written:
//
//   - Parts not renewed within PartTTL are dropped (expire).
//   - Alone, the process may hold the whole budget.
//   - With n live processes, an equal part of it (Budget/n), or less when
//     the others hold more than theirs: they give it back as compactions
//     free their writes, each taking its equal part at its next renewal.
//     What the others reserve is never counted as free: two processes
//     never both count the same bytes.
//   - A process holds what it holds whatever its part: its part is then
//     what it holds, and it writes no more until compactions free some.
//
// The reason says how the budget is split ("" when alone).
func shareOf(sh Shared, id string, own Part, now time.Time) (Shared, int64, string) {
	if sh.Writers == nil {
		sh.Writers = map[string]Part{}
	} else {
		writers := make(map[string]Part, len(sh.Writers))
		for w, p := range sh.Writers {
			writers[w] = p
		}
		sh.Writers = writers
	}
	sh.expire(id, now)
	n := int64(len(sh.Writers))
	if _, ok := sh.Writers[id]; !ok {
		n++
	}
	free := max(0, sh.Budget-sh.others(id)-sh.Chain.Outstanding)
	share := min(free, sh.Budget/n)
	if n == 1 {
		share = free
	}
	own.Reserved = max(share, own.Outstanding)
	own.Renewed = now
	sh.Writers[id] = own
	if n == 1 {
		return sh, share, ""
	}
	return sh, share, fmt.Sprintf("shared by %d processes writing to this etcd: an equal part is %s, this one may hold %s of it now (the others hold %s, and give back what passes their part as compactions free it)",
		n, BytesText(sh.Budget/n), BytesText(share), BytesText(sh.others(id)))
}

// leave removes id's part, handing on its bytes not compacted yet, and
// the row's peak.
func leave(sh Shared, id string, own Part, peak int64) Shared {
	writers := make(map[string]Part, len(sh.Writers))
	for w, p := range sh.Writers {
		if w != id {
			writers[w] = p
		}
	}
	sh.Writers = writers
	sh.handOn(own)
	sh.Chain.Peak = max(sh.Chain.Peak, peak)
	return sh
}

// renewed is the latest renewal of the ledger's parts (the zero time
// when none).
func (sh Shared) renewed() time.Time {
	var t time.Time
	for _, p := range sh.Writers {
		if p.Renewed.After(t) {
			t = p.Renewed
		}
	}
	return t
}
