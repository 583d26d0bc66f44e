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

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// untold measures `graduator migrate --prune` of N widgets of -untold-bytes
// as a newcomer runs it (etcd's quota not told) and told the quota etcd
// reports, on populations of their own, in the same run: with
// -etcd-default-quota, etcd's default 2 GiB.
func (b *bench) untold(ctx context.Context, cli string) error {
	quota, err := b.env.Etcd.Quota(ctx)
	if err != nil {
		return err
	}
	notes := strings.Repeat("x", b.opts.untoldBytes)
	fmt.Printf("\n== untold: graduator migrate --prune of %d widgets of %d B notes, etcd's quota %d bytes (as etcd reports it)\n",
		b.opts.n, b.opts.untoldBytes, quota)
	// -rounds rounds, the order swapped each round: on a shared machine
	// the load changes from one run to the next.
	var untold, told time.Duration
	for round := range b.opts.rounds {
		for _, tell := range [][]bool{{false, true}, {true, false}}[round%2] {
			label, args := "quota not told", []string{}
			if tell {
				label = "told --etcd-quota " + strconv.FormatInt(quota, 10)
				args = append(args, "--etcd-quota", strconv.FormatInt(quota, 10))
			}
			d, err := b.untoldRun(ctx, cli, label, notes, args)
			if err != nil {
				return fmt.Errorf("%s: %w", label, err)
			}
			if tell {
				told += d
			} else {
				untold += d
			}
		}
	}
	fmt.Printf("not told / told, over %d rounds: %.2fx\n", b.opts.rounds, untold.Seconds()/told.Seconds())
	return nil
}

// untoldRun creates a population at v1, flips it to v2 and runs the CLI on it.
func (b *bench) untoldRun(ctx context.Context, cli, label, notes string, args []string) (took time.Duration, err error) {
	b.groups++
	v1, err := b.widgetCRD(ctx, fmt.Sprintf("u%d.bench.graduator.io", b.groups))
	if err != nil {
		return 0, err
	}
	defer func() {
		if dropErr := b.dropPopulation(ctx, v1); dropErr != nil && err == nil {
			err = dropErr
		}
	}()
	if err := b.createManyLike(ctx, v1, b.opts.n, notes); err != nil {
		return 0, err
	}
	crdName := v1.Resource + "." + v1.Group
	if err := b.flip(ctx, crdName, "v2"); err != nil {
		return 0, err
	}
	var progress bytes.Buffer
	start := time.Now()
	_, _, _, out, err := cliPeakRSSTo(ctx, cli, &progress,
		append([]string{"migrate", crdName, "--prune", "-o", "json", "--kubeconfig", b.kubeconfig}, args...)...)
	took = time.Since(start)
	if err != nil {
		return took, fmt.Errorf("graduator migrate: %w: %s", err, out)
	}
	var summary struct {
		Rewritten   int64  `json:"rewritten"`
		Pruned      bool   `json:"pruned"`
		SpaceBudget string `json:"spaceBudget"`
	}
	if err := json.Unmarshal(out, &summary); err != nil {
		return took, fmt.Errorf("read the summary %q: %w", out, err)
	}
	fmt.Printf("%-34s %8.1fs  %6.0f objects/s  %d rewritten, pruned %v, %d waits for a compaction\n  budget: %s\n",
		label, took.Seconds(), rate(b.opts.n, took), summary.Rewritten, summary.Pruned, compactionWaits(progress.Bytes()), summary.SpaceBudget)
	return took, nil
}

// compactionWaits counts the waits for a compaction in the CLI's JSON
// progress: the records whose compactionWait starts a wait.
func compactionWaits(progress []byte) int {
	waits, waiting := 0, false
	scanner := bufio.NewScanner(bytes.NewReader(progress))
	scanner.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for scanner.Scan() {
		var record struct {
			CompactionWait string `json:"compactionWait"`
		}
		if json.Unmarshal(scanner.Bytes(), &record) != nil {
			continue
		}
		if record.CompactionWait != "" && !waiting {
			waits++
		}
		waiting = record.CompactionWait != ""
	}
	return waits
}
