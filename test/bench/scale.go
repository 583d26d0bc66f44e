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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/test/envtestutil"
)

// scaleCreators are the concurrent etcd transactions that create a
// population.
const scaleCreators = 8

// scaleRow is one N of the scale section: rates in objects/s, peaks in KiB.
type scaleRow struct {
	n int
	// watchCache is the API server's --watch-cache in the row's run.
	watchCache                        bool
	create, ceiling, cli, pass        float64
	cliHWM, operatorHWM, verifyHWM    int64
	cliTook, operatorTook, statusTook time.Duration
	apiserverHWM                      int64
	// parts is where the CLI's time went.
	parts cliParts
	// etcdDB is etcd's database size after the N's last step.
	etcdDB int64
	// round counts from 0; the ceiling ran before the CLI when
	// ceilingFirst.
	round        int
	ceilingFirst bool
	// costs are what each contender cost the machine, in the order they
	// ran.
	costs []contenderCost
}

// scale measures, for each N of -scale-ns, on one population of N small
// widgets: the 64-writer ceiling, `graduator migrate --prune` (the CLI, a
// child process), the operator (cmd/manager, a child process, a GitOps
// policy) from the storage flip to storedVersions pruned, `graduator status`
// and `graduator verify`, all at the same N in the same round, so the
// server's own slowdown with N is not charged to Graduator.
//
// Each contender needs every object stored at a version other than the
// storage version. Creating N objects for each would cost two creations
// (half an hour at 1,000,000), so the population is created once, at v1,
// and the storage version alternates. The widget CRD's two versions share
// one schema with no conversion, so each pass rewrites the same bytes but
// for apiVersion, and each begins with no object at the storage version
// (the API server skips a write whose bytes are unchanged, so a pass over
// objects already at the storage version would measure nothing).
//
// The ceiling makes the migration's own write: after a storage flip, a
// merge patch carrying only the resourceVersion, which the API server
// re-encodes to the new storage version. It and the CLI each re-encode the
// whole population once, one after a flip v1 -> v2, the other after a
// flip back: the ceiling first in odd rounds, the CLI first in even ones,
// so that neither always meets the fresher cache or the larger database.
// The ceiling may stop after -scale-ceiling-for (a whole pass at 1,000,000
// would cost most of an hour for one rate). Populations up to
// -scale-create-api-max are created through the API server, as users
// create them; larger ones as copies straight into etcd. The operator
// comes last, so that a run stopped during its longest step has printed
// every other figure.
func (b *bench) scale(ctx context.Context, cli, manager string) error {
	fmt.Printf("\n== scale: N small objects created once; ceiling, CLI, operator, status and verify at the same N (watch cache %s) ==\n",
		onOff(b.opts.watchCache))
	var rows []scaleRow
	for round := range b.opts.rounds {
		for _, n := range b.opts.scaleNs {
			row, err := b.scaleRound(ctx, cli, manager, n, round)
			if err != nil {
				// The rounds measured so far are an hour's work: keep them.
				printScale(rows)
				return fmt.Errorf("at %d objects: %w", n, err)
			}
			rows = append(rows, row)
		}
	}
	printScale(rows)
	return nil
}

// printScale prints the scale section's tables: the figures, then where
// the CLI's time went.
func printScale(rows []scaleRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Printf("\n%9s %5s %8s %8s %8s %6s %7s %6s %8s %9s %22s %8s %8s %10s %8s\n", "N", "cache", "create/s", "ceil/s", "CLI/s", "ratio",
		"pass/s", "ratio", "CLI MiB", "oper MiB", "flip->pruned (target)", "status", "ver MiB", "apisrv MiB", "etcd MiB")
	for _, r := range rows {
		operatorMiB, flipToPruned := "-", "-"
		if r.operatorTook > 0 {
			operatorMiB = fmt.Sprintf("%.1f", mib(r.operatorHWM))
			flipToPruned = fmt.Sprintf("%s (%s)", r.operatorTook.Round(100*time.Millisecond), operatorTarget(r.cliTook).Round(100*time.Millisecond))
		}
		fmt.Printf("%9d %5s %8.0f %8.0f %8.0f %6.2f %7.0f %6.2f %8.1f %9s %22s %8s %8.1f %10.0f %8.0f\n", r.n, onOff(r.watchCache), r.create, r.ceiling,
			r.cli, r.cli/r.ceiling, r.pass, r.pass/r.ceiling, mib(r.cliHWM), operatorMiB, flipToPruned,
			r.statusTook.Round(10*time.Millisecond), mib(r.verifyHWM), mib(r.apiserverHWM), mib(r.etcdDB>>10))
	}
	fmt.Printf("\nverdict (the whole CLI run against the same N's ceiling: >= %.2f at %d objects, >= %.2f above; the operator's flip to pruned within 1.05 x the CLI + %s + the policy's settleDelay, %s):\n",
		wholeTargetSmall, smallScaleN, wholeTarget, operatorSteps, graduation.DefaultSettleDelay)
	for _, r := range rows {
		target := wholeTarget
		if r.n <= smallScaleN {
			target = wholeTargetSmall
		}
		line := fmt.Sprintf("%9d (watch cache %s): whole %.2f of the ceiling, target %.2f: %s", r.n, onOff(r.watchCache), r.cli/r.ceiling, target,
			metOrMissed(r.cli/r.ceiling >= target))
		if r.operatorTook > 0 {
			line += fmt.Sprintf("; operator %s, target %s (1.05 x %s + %s + %s): %s", r.operatorTook.Round(100*time.Millisecond),
				operatorTarget(r.cliTook).Round(100*time.Millisecond), r.cliTook.Round(100*time.Millisecond), operatorSteps,
				graduation.DefaultSettleDelay, metOrMissed(r.operatorTook <= operatorTarget(r.cliTook)))
		}
		fmt.Println(line)
	}
	fmt.Printf("\nthe CLI's time, in seconds:\n%9s %8s %8s %8s %8s %8s %8s %8s  %s\n", "N", "whole", "proof", "settle", "pass", "sweep", "prune", "waited", "sweep by")
	for _, r := range rows {
		p := r.parts
		fmt.Printf("%9d %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f  %s\n", r.n, r.cliTook.Seconds(), p.proof, p.settle, p.pass, p.sweep, p.prune,
			p.compactionWait, p.sweepBy)
	}
	printLimits(rows)
	if len(rows) > 1 {
		first, last := rows[0], rows[len(rows)-1]
		fmt.Printf("peak RSS growth N=%d -> N=%d: CLI %+.1f MiB, verify %+.1f MiB (target: CLI within 16 MiB)\n",
			first.n, last.n, mib(last.cliHWM-first.cliHWM), mib(last.verifyHWM-first.verifyHWM))
	}
}

// operatorTarget is the operator's flip to pruned allowed against the
// CLI's whole run at the same N: 1.05 times it, operatorSteps, and the
// policy's settle delay (the scale section's policy sets none: the
// default). The settle is a deliberate wait for every API server to write
// the new version; the CLI makes none, because its user switched the
// storage version before running it.
func operatorTarget(cliTook time.Duration) time.Duration {
	return time.Duration(1.05*float64(cliTook)) + operatorSteps + graduation.DefaultSettleDelay
}

// operatorSteps is what the operator's target allows for the steps the CLI
// does not take: the manager noticing the flip, its plan and status writes.
const operatorSteps = 15 * time.Second

// The whole CLI run's targets against the same N's ceiling: a second of
// proof and discovery is a fixed cost that no pass wins back at
// smallScaleN objects and under.
const (
	wholeTarget, wholeTargetSmall = 0.90, 0.80
	smallScaleN                   = 6000
)

func onOff(on bool) string { return map[bool]string{true: "on", false: "off"}[on] }

func metOrMissed(met bool) string { return map[bool]string{true: "met", false: "MISSED"}[met] }

// scaleRound measures one N; see scale.
func (b *bench) scaleRound(ctx context.Context, cli, manager string, n, round int) (row scaleRow, err error) {
	row.n, row.watchCache, row.round, row.ceilingFirst = n, b.opts.watchCache, round, round%2 == 0
	fmt.Printf("\n-- N=%d (watch cache %s) --\n", n, onOff(row.watchCache))
	b.groups++
	group := fmt.Sprintf("p%d.bench.graduator.io", b.groups)
	v1, err := b.widgetCRD(ctx, group)
	if err != nil {
		return row, err
	}
	defer func() {
		if dropErr := b.dropPopulation(ctx, v1); dropErr != nil && err == nil {
			err = dropErr
		}
	}()
	crdName := "widgets." + group

	start := time.Now()
	how := "into etcd"
	if n <= b.opts.scaleCreateAPIMax {
		how = "through the API server"
		err = envtestutil.CreateObjects(ctx, b.dyn, v1, n, scaleCreators, func(i int) *unstructured.Unstructured { return widget(v1, i) })
	} else {
		err = b.createMany(ctx, v1, n)
	}
	if err != nil {
		return row, err
	}
	row.create = rate(n, time.Since(start))
	fmt.Printf("%-42s %8.0f objects/s  (%s)\n", "created at v1 ("+how+")", row.create, time.Since(start).Round(time.Millisecond))

	// Both orders of the ceiling and the CLI end with every object
	// stored at v1.
	stored := "v1"
	other := func() string { return map[string]string{"v1": "v2", "v2": "v1"}[stored] }
	if !b.opts.scaleOperatorOnly {
		if err := b.scaleCLI(ctx, cli, crdName, n, row.ceilingFirst, &row); err != nil {
			return row, err
		}
	}

	if b.opts.scaleOperator == 0 || n <= b.opts.scaleOperator {
		to := other()
		var cost contenderCost
		if row.operatorTook, row.operatorHWM, cost, err = b.scaleOperator(ctx, manager, crdName, to, n); err != nil {
			return row, fmt.Errorf("operator: %w", err)
		}
		fmt.Printf("%-42s %8.0f objects/s  (flip to pruned %s, peak RSS %.1f MiB)\n", "operator (GitOps policy), "+stored+"->"+to,
			rate(n, row.operatorTook), row.operatorTook.Round(100*time.Millisecond), mib(row.operatorHWM))
		printCost(cost, n)
		row.costs = append(row.costs, cost)
	} else {
		fmt.Printf("%-42s not measured above N=%d (-scale-operator-max)\n", "operator (GitOps policy)", b.opts.scaleOperator)
	}

	// With the policy's status filled in, as an operator reads it.
	// The table shows the slower of the two.
	for _, status := range []struct{ label, crd string }{{"graduator status", ""}, {"graduator status CRD", crdName}} {
		args := []string{"status", "--kubeconfig", b.kubeconfig}
		if status.crd != "" {
			args = append(args, status.crd)
		}
		start = time.Now()
		if _, _, _, out, err := cliPeakRSS(ctx, cli, args...); err != nil {
			return row, fmt.Errorf("%s: %w: %s", status.label, err, out)
		}
		took := time.Since(start)
		row.statusTook = max(row.statusTook, took)
		fmt.Printf("%-42s %s\n", status.label, took.Round(10*time.Millisecond))
	}

	if pid, err := childPID("kube-apiserver"); err == nil {
		if _, row.apiserverHWM, err = procStatus(pid); err != nil {
			return row, err
		}
		fmt.Printf("%-42s %.0f MiB\n", "kube-apiserver peak RSS so far (VmHWM)", mib(row.apiserverHWM))
	}
	if endpoints := b.env.Etcd.Client().Endpoints(); len(endpoints) > 0 {
		if status, err := b.env.Etcd.Client().Status(ctx, endpoints[0]); err == nil {
			row.etcdDB = status.DbSize
			fmt.Printf("%-42s %.0f MiB (in use %.0f MiB; etcd's default quota is 2048 MiB)\n", "etcd's database", mib(status.DbSize>>10), mib(status.DbSizeInUse>>10))
		}
	}
	return row, nil
}

// scaleCLI measures, on n widgets stored at v1, the 64-writer ceiling and
// `graduator migrate --prune`, each re-encoding the population after a
// storage flip (v1 -> v2 for the first, v2 -> v1 for the second), then
// `graduator verify`. Every object ends stored at v1.
func (b *bench) scaleCLI(ctx context.Context, cli, crdName string, n int, ceilingFirst bool, row *scaleRow) error {
	steps := []func(from, to string) error{
		func(from, to string) error { return b.scaleCeiling(ctx, crdName, from, to, row) },
		func(from, to string) error { return b.scaleMigrate(ctx, cli, crdName, from, to, n, row) },
	}
	if !ceilingFirst {
		steps[0], steps[1] = steps[1], steps[0]
	}
	for i, versions := range [][2]string{{"v1", "v2"}, {"v2", "v1"}} {
		if err := b.flip(ctx, crdName, versions[1]); err != nil {
			return err
		}
		if err := steps[i](versions[0], versions[1]); err != nil {
			return err
		}
	}
	var err error
	row.verifyHWM, err = b.scaleVerify(ctx, cli, crdName, n)
	return err
}

// scaleCeiling is the 64-writer ceiling after a flip from -> to: a merge
// patch carrying only the resourceVersion of each object, which the API
// server re-encodes to the storage version to, as the migration does.
func (b *bench) scaleCeiling(ctx context.Context, crdName, from, to string, row *scaleRow) error {
	gvr := envtestutil.WidgetResource(strings.TrimPrefix(crdName, "widgets."), to)
	// The ceiling runs in the bench's own process: its client CPU is the
	// bench's, sampler included.
	m, err := b.startMeter(ctx, gvr.Group, "bench", func() (int, error) { return os.Getpid(), nil })
	if err != nil {
		return err
	}
	start := time.Now()
	written, err := ceilingFor(ctx, b.dyn, gvr, 64, b.opts.scaleCeiling, false)
	took := time.Since(start)
	row.ceiling = rate(written, took)
	cost, meterErr := m.stop(ctx, "ceiling", row.ceiling)
	if err != nil {
		return fmt.Errorf("ceiling: %w", err)
	}
	if meterErr != nil {
		return meterErr
	}
	fmt.Printf("%-42s %8.0f objects/s  (%d objects in %s)\n", "ceiling (64 writers, re-encode), "+from+"->"+to, row.ceiling,
		written, took.Round(time.Millisecond))
	printCost(cost, written)
	row.costs = append(row.costs, cost)
	if b.opts.scaleCeiling > 0 {
		// Stopped by -scale-ceiling-for: the rest is re-encoded untimed,
		// so that the flip back leaves every object for the CLI to
		// rewrite (an object the ceiling left at the old version would be
		// a write the API server skips).
		if _, err := ceilingFor(ctx, b.dyn, gvr, 64, 0, false); err != nil {
			return fmt.Errorf("ceiling, the rest: %w", err)
		}
	}
	return nil
}

// scaleMigrate is `graduator migrate --prune` after a flip from -> to.
func (b *bench) scaleMigrate(ctx context.Context, cli, crdName, from, to string, n int, row *scaleRow) error {
	name := filepath.Base(cli)
	m, err := b.startMeter(ctx, strings.TrimPrefix(crdName, "widgets."), "CLI", func() (int, error) { return childPID(name) })
	if err != nil {
		return err
	}
	start := time.Now()
	var progress bytes.Buffer
	hwm, _, _, out, err := cliPeakRSSTo(ctx, cli, &progress, append([]string{"migrate", crdName, "--prune", "-o", "json",
		"--kubeconfig", b.kubeconfig}, b.toldQuota()...)...)
	took := time.Since(start)
	cost, meterErr := m.stop(ctx, "CLI", rate(n, took))
	if err != nil {
		return fmt.Errorf("graduator migrate: %w: %s%s", err, out, progress.Bytes()[max(0, progress.Len()-2000):])
	}
	if meterErr != nil {
		return meterErr
	}
	row.cliTook, row.cliHWM = took, hwm
	row.cli = rate(n, row.cliTook)
	fmt.Printf("%-42s %8.0f objects/s  (%s, peak RSS %.1f MiB)\n", "graduator migrate --prune, "+from+"->"+to, row.cli,
		row.cliTook.Round(time.Millisecond), mib(hwm))
	printCost(cost, n)
	row.costs = append(row.costs, cost)
	parts, ok := cliPartsOf(progress.Bytes(), out)
	if !ok {
		fmt.Printf("  graduator said: %s", out)
	} else {
		row.pass, row.parts = parts.passRate, parts
		fmt.Printf("  proof %.1fs, settle %.1fs, main pass %.1fs (%.0f objects/s from its first page to its last), sweep %.1fs (by %s), prune %.1fs; waited for compactions %.1fs\n",
			parts.proof, parts.settle, parts.pass, parts.passRate, parts.sweep, parts.sweepBy, parts.prune, parts.compactionWait)
		fmt.Printf("  the writer limit by page, where it changed (seconds into the run): %s\n", parts.limits)
	}
	return nil
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// createMany creates n small widgets of gvr stored at v1: the first through
// the API server, the others straight into etcd as copies of what the API
// server stored for the first (the same bytes but for name, uid and
// spec.size). Through the API server this machine created about 300 a
// second (64 creators on four clients, a connection each): a million would
// take an hour.
func (b *bench) createMany(ctx context.Context, gvr schema.GroupVersionResource, n int) error {
	return b.createManyLike(ctx, gvr, n, smallNotes)
}

// createManyLike is createMany of widgets whose spec.notes are notes.
func (b *bench) createManyLike(ctx context.Context, gvr schema.GroupVersionResource, n int, notes string) error {
	first := widget(gvr, 0)
	if err := unstructured.SetNestedField(first.Object, notes, "spec", "notes"); err != nil {
		return err
	}
	if _, err := b.dyn.Resource(gvr).Namespace("default").Create(ctx, first, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create widget %s: %w", first.GetName(), err)
	}
	etcd := b.env.Etcd
	prefix := fmt.Sprintf("%s/%s/%s/default/", etcd.Prefix, gvr.Group, gvr.Resource)
	resp, err := etcd.Client().Get(ctx, prefix+first.GetName())
	if err != nil || len(resp.Kvs) != 1 {
		return fmt.Errorf("read widget %s from etcd: %v (%d keys)", first.GetName(), err, len(resp.Kvs))
	}
	var stored map[string]any
	if err := json.Unmarshal(resp.Kvs[0].Value, &stored); err != nil {
		return fmt.Errorf("decode widget %s from etcd: %w", first.GetName(), err)
	}
	batches := (n - 1 + etcdTxnOps - 1) / etcdTxnOps
	return envtestutil.ForEach(batches, scaleCreators, func(batch int) error {
		var ops []clientv3.Op
		for i := 1 + batch*etcdTxnOps; i < min(n, 1+(batch+1)*etcdTxnOps); i++ {
			obj := (&unstructured.Unstructured{Object: stored}).DeepCopy()
			name := widget(gvr, i).GetName()
			obj.SetName(name)
			obj.SetUID(uuid.NewUUID())
			if err := unstructured.SetNestedField(obj.Object, int64(i), "spec", "size"); err != nil {
				return err
			}
			data, err := json.Marshal(obj.Object)
			if err != nil {
				return err
			}
			ops = append(ops, clientv3.OpPut(prefix+name, string(data)))
		}
		if _, err := etcd.Client().Txn(ctx).Then(ops...).Commit(); err != nil {
			return fmt.Errorf("put widgets of batch %d into etcd: %w", batch, err)
		}
		return nil
	})
}

// dropPopulation deletes the widgets of gvr and their CRD. The API server
// would delete the objects one by one (an hour at 1,000,000): they are
// removed from etcd first. Interrupted, it does nothing: the control plane
// stops next, and deleting a big population first would only delay that.
func (b *bench) dropPopulation(ctx context.Context, gvr schema.GroupVersionResource) error {
	if ctx.Err() != nil {
		return nil
	}
	prefix := fmt.Sprintf("%s/%s/%s/", b.env.Etcd.Prefix, gvr.Group, gvr.Resource)
	if _, err := b.env.Etcd.Client().Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("delete the widgets of %s from etcd: %w", gvr.Group, err)
	}
	return b.drop(ctx, gvr.Group)
}

// etcdTxnOps is the puts of one etcd transaction: etcd's default
// --max-txn-ops.
const etcdTxnOps = 128

// widget is small widget number i of gvr.
func widget(gvr schema.GroupVersionResource, i int) *unstructured.Unstructured {
	return envtestutil.Widget(gvr, "default", fmt.Sprintf("w-%07d", i), map[string]any{
		"color": "blue", "size": int64(i), "notes": smallNotes,
	})
}

// flip sets the storage version of the widget CRD crdName, lets the API
// server pick it up and has it build the CRD's new storage.
func (b *bench) flip(ctx context.Context, crdName, version string) error {
	if err := envtestutil.SetStorageVersion(ctx, b.c, crdName, version); err != nil {
		return err
	}
	if err := sleep(ctx, 2*time.Second); err != nil {
		return err
	}
	return b.buildStorage(ctx, envtestutil.WidgetResource(strings.TrimPrefix(crdName, "widgets."), version))
}

// buildStorage has the API server build the storage of gvr's CRD, as a
// cluster's controllers do right after the CRD changed. The API server
// drops a CRD's storage on any change of its spec and builds the new one,
// with its watch cache, at the first request that follows: a LIST of
// every object from etcd, each decoded, about half a second of both
// cores at 3,000 small objects. A cluster's controllers of the resource
// make that request at once (their watches end with the old storage);
// nothing watches the bench's widgets, so without this the first
// contender timed after a flip, and any client beside it, would pay for
// the flip. A LIST is served from etcd until the watch cache is ready, a
// watch is not: the API server answers 429 until then, which the client
// retries.
func (b *bench) buildStorage(ctx context.Context, gvr schema.GroupVersionResource) error {
	list, err := b.dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return fmt.Errorf("list %s after the flip: %w", gvr, err)
	}
	for deadline := time.Now().Add(10 * time.Minute); ; {
		w, err := b.dyn.Resource(gvr).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err == nil {
			w.Stop()
			break
		}
		if !apierrors.IsTooManyRequests(err) || time.Now().After(deadline) {
			return fmt.Errorf("watch %s after the flip: %w", gvr, err)
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	// The decoding left garbage for the API server's collector.
	return sleep(ctx, time.Second)
}

// scaleOperator runs the manager (a child process) with a GitOps policy
// selecting the CRD's group, flips the CRD's storage version to version as a
// GitOps tool would, and returns the time from the flip to storedVersions
// pruned to [version], the manager's peak RSS (VmHWM) over its whole life
// and what its graduation of n objects cost the machine.
func (b *bench) scaleOperator(ctx context.Context, manager, crdName, version string, n int) (took time.Duration, hwm int64, cost contenderCost, err error) {
	group := strings.TrimPrefix(crdName, "widgets.")
	policy := &graduatorv1alpha1.CRDVersionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "scale-" + group},
		Spec:       graduatorv1alpha1.CRDVersionPolicySpec{Selector: &graduatorv1alpha1.CRDSelector{Groups: []string{group}}},
	}
	if err := b.c.Create(ctx, policy); err != nil {
		return 0, 0, cost, fmt.Errorf("create the policy: %w", err)
	}
	defer func() { _ = b.c.Delete(context.WithoutCancel(ctx), policy) }()
	m, err := startManager(ctx, manager, b.kubeconfig, b.toldQuota()...)
	if err != nil {
		return 0, 0, cost, err
	}
	defer m.stop()
	if err := m.waitSynced(ctx, 5*time.Minute); err != nil {
		return 0, 0, cost, err
	}
	meter, err := b.startMeter(ctx, group, "manager", func() (int, error) { return m.cmd.Process.Pid, nil })
	if err != nil {
		return 0, 0, cost, err
	}
	took, err = b.flipToPruned(ctx, m, crdName, version)
	var meterErr error
	if cost, meterErr = meter.stop(ctx, "operator", rate(n, took)); err != nil || meterErr != nil {
		return 0, 0, cost, errors.Join(err, meterErr)
	}
	// VmHWM only grows: read at the end it is the peak of the whole run.
	_, hwm, err = procStatus(m.cmd.Process.Pid)
	return took, hwm, cost, err
}

// flipToPruned flips the CRD's storage version to version as a GitOps tool
// would, and returns the time until the manager m pruned storedVersions to
// [version].
func (b *bench) flipToPruned(ctx context.Context, m *managerProcess, crdName, version string) (time.Duration, error) {
	if err := envtestutil.SetStorageVersion(ctx, b.c, crdName, version); err != nil {
		return 0, err
	}
	flipped := time.Now()
	for deadline := flipped.Add(3 * time.Hour); ; {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := b.c.Get(ctx, client.ObjectKey{Name: crdName}, &crd); err != nil {
			return 0, err
		}
		if slices.Equal(crd.Status.StoredVersions, []string{version}) {
			return time.Since(flipped), nil
		}
		if m.exited() {
			return 0, fmt.Errorf("the manager exited; its log ends:\n%s", m.logTail())
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("storedVersions of %s not pruned in 3 hours: %w", crdName, errTimeout)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// scaleVerify runs `graduator verify --snapshot` then `--against` on the CRD
// and returns the larger of their peak RSS.
func (b *bench) scaleVerify(ctx context.Context, cli, crdName string, n int) (int64, error) {
	dir, err := os.MkdirTemp("", "graduator-bench-scale-")
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	file := filepath.Join(dir, "snapshot.json.gz")
	var peak int64
	for _, flag := range []string{"--snapshot", "--against"} {
		start := time.Now()
		hwm, _, _, out, err := cliPeakRSS(ctx, cli, "verify", crdName, flag, file, "--kubeconfig", b.kubeconfig)
		if err != nil {
			return 0, fmt.Errorf("graduator verify %s: %w: %s", flag, err, out)
		}
		peak = max(peak, hwm)
		fmt.Printf("%-42s %8.0f objects/s  (%s, peak RSS %.1f MiB)\n", "graduator verify "+flag, rate(n, time.Since(start)),
			time.Since(start).Round(time.Millisecond), mib(hwm))
	}
	return peak, nil
}

// managerProcess is cmd/manager running as a child process.
type managerProcess struct {
	cmd    *exec.Cmd
	log    *os.File
	cancel context.CancelFunc
	done   chan struct{}
}

// startManager starts the manager against the control plane; stop it with
// stop, on every path.
func startManager(ctx context.Context, manager, kubeconfig string, args ...string) (*managerProcess, error) {
	logFile, err := os.CreateTemp("", "graduator-bench-manager-*.log")
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(mctx, manager, append([]string{"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second // then SIGKILL
	if err := cmd.Start(); err != nil {
		cancel()
		_ = logFile.Close()
		_ = os.Remove(logFile.Name())
		return nil, err
	}
	m := &managerProcess{cmd: cmd, log: logFile, cancel: cancel, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(m.done) }()
	return m, nil
}

func (m *managerProcess) stop() {
	m.cancel()
	<-m.done
	_ = m.log.Close()
	_ = os.Remove(m.log.Name())
}

func (m *managerProcess) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

func (m *managerProcess) logTail() string {
	data, _ := os.ReadFile(m.log.Name())
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}

// waitSynced waits until the manager's controllers started their workers.
func (m *managerProcess) waitSynced(ctx context.Context, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); ; {
		data, _ := os.ReadFile(m.log.Name())
		if bytes.Count(data, []byte(syncedLine)) >= managerControllers {
			return nil
		}
		if m.exited() {
			return fmt.Errorf("the manager exited; its log ends:\n%s", m.logTail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the manager's caches did not sync: %w; its log ends:\n%s", errTimeout, m.logTail())
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// childPID is the pid of this process's child named name (as in
// /proc/PID/status), such as the kube-apiserver envtest started.
func childPID(name string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	self := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		var comm, ppid string
		for line := range strings.Lines(string(data)) {
			if v, ok := strings.CutPrefix(line, "Name:"); ok {
				comm = strings.TrimSpace(v)
			} else if v, ok := strings.CutPrefix(line, "PPid:"); ok {
				ppid = strings.TrimSpace(v)
			}
		}
		if comm == name && ppid == self {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no child process %s", name)
}

// toldQuota is the flag that tells a contender etcd's quota: none, as a
// newcomer runs it (the engine then assumes etcd's default 2 GiB), unless
// -scale-tell-quota.
func (b *bench) toldQuota() []string {
	if !b.opts.scaleTellQuota {
		return nil
	}
	return []string{"--etcd-quota", strconv.Itoa(etcdQuota)}
}

// cliParts splits a `graduator migrate --prune -o json` run, in seconds:
// the proof (the preflight step: its sample and the round-trip proof's read
// of every object), the settle (from the migration step's start to its
// first page done: discovery, the engine's setup, the first page), the main
// pass (its first page done to its last), the catch-up sweep (the last
// page to the migration step's end) and the prune; the time the run waited
// for etcd's compaction (page records that said so, to the next), and how
// the sweep found what others wrote.
type cliParts struct {
	proof, settle, pass, sweep, prune, compactionWait float64
	passRate                                          float64
	sweepBy                                           string
	// limits is the writer limit by page, where it changed: the start and
	// the climb of the CLI's run.
	limits string
}

func cliPartsOf(progress, summary []byte) (cliParts, bool) {
	var sum struct {
		Sweep       string `json:"sweep"`
		SweepReason string `json:"sweepReason"`
		Steps       []struct {
			Action       string  `json:"action"`
			StartSeconds float64 `json:"startSeconds"`
			Seconds      float64 `json:"seconds"`
		} `json:"steps"`
	}
	if json.Unmarshal(summary, &sum) != nil {
		return cliParts{}, false
	}
	var parts cliParts
	var migrateStart, migrateEnd float64
	for _, st := range sum.Steps {
		switch st.Action {
		case "Preflight":
			parts.proof += st.Seconds
		case "Migrate":
			migrateStart, migrateEnd = st.StartSeconds, st.StartSeconds+st.Seconds
		case "Prune":
			parts.prune += st.Seconds
		}
	}
	parts.sweepBy = sum.Sweep
	if sum.Sweep == "list" {
		parts.sweepBy += " (" + sum.SweepReason + ")"
	}
	type record struct {
		Done           int64   `json:"done"`
		Writers        int     `json:"writers"`
		CatchUp        bool    `json:"catchUp"`
		CompactionWait string  `json:"compactionWait"`
		ElapsedSeconds float64 `json:"elapsedSeconds"`
	}
	var first, last record
	seen, waitingSince, writers := 0, -1.0, -1
	var limits []string
	for line := range bytes.Lines(progress) {
		var rec record
		if json.Unmarshal(line, &rec) != nil {
			continue
		}
		if rec.Writers != writers {
			writers = rec.Writers
			limits = append(limits, fmt.Sprintf("%.1fs %d", rec.ElapsedSeconds, writers))
		}
		if waitingSince >= 0 {
			parts.compactionWait += rec.ElapsedSeconds - waitingSince
			waitingSince = -1
		}
		if rec.CompactionWait != "" {
			waitingSince = rec.ElapsedSeconds
		}
		if rec.CatchUp || rec.Done == 0 {
			continue
		}
		if seen == 0 {
			first = rec
		}
		last = rec
		seen++
	}
	if seen < 2 || last.ElapsedSeconds <= first.ElapsedSeconds || migrateEnd == 0 {
		return cliParts{}, false
	}
	parts.settle = first.ElapsedSeconds - migrateStart
	parts.pass = last.ElapsedSeconds - first.ElapsedSeconds
	parts.passRate = float64(last.Done-first.Done) / parts.pass
	parts.sweep = migrateEnd - last.ElapsedSeconds
	parts.limits = strings.Join(limits, ", ")
	return parts, true
}
