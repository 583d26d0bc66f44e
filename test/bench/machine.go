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
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/graduator/graduator/test/envtestutil"
)

// The machine's limit: on one machine the API server, etcd and the client
// share the CPUs, so the most any client can reach is the CPUs divided by
// what the API server and etcd spend per write. A meter samples, while one
// contender runs alone, etcd's revision and the CPU time of the API
// server, etcd and the contender's client; the contender's cost is taken
// between its first and its last write, which etcd tells afterwards: the
// least and the greatest mod revision of the population's keys written
// since the meter started. Other writers (leases, events, the operator's
// status) move the revision too, so the revision alone cannot tell them.

// meterEvery is how often a meter samples: a window's ends are each at
// most this far from the first and the last write.
const meterEvery = 100 * time.Millisecond

// cpuTimes are the CPU seconds (user and system) of the processes a
// contender loads.
type cpuTimes struct{ apiserver, etcd, client float64 }

func (c cpuTimes) minus(o cpuTimes) cpuTimes {
	return cpuTimes{apiserver: c.apiserver - o.apiserver, etcd: c.etcd - o.etcd, client: c.client - o.client}
}

// server is what the API server and etcd spent: the cost the machine's
// limit divides the CPUs by.
func (c cpuTimes) server() float64 { return c.apiserver + c.etcd }

// startState is what may differ at a contender's start and explain why the
// one that runs second meets a faster or a slower server.
type startState struct {
	// etcdDB and etcdInUse are etcd's database size and the part of it in
	// use, in bytes.
	etcdDB, etcdInUse int64
	// sinceCompaction is the time since etcd's last compaction; negative
	// when there was none since etcd started.
	sinceCompaction time.Duration
	// apiserverRSS is the API server's VmRSS in KiB, apiserverHeap its Go
	// heap in use in bytes.
	apiserverRSS  int64
	apiserverHeap float64
}

func (s startState) String() string {
	compaction := "none since etcd started"
	if s.sinceCompaction >= 0 {
		compaction = fmt.Sprintf("%.0fs ago", s.sinceCompaction.Seconds())
	}
	return fmt.Sprintf("etcd %.0f MiB (in use %.0f MiB), last compaction %s; kube-apiserver RSS %.0f MiB, heap in use %.0f MiB",
		mib(s.etcdDB>>10), mib(s.etcdInUse>>10), compaction, mib(s.apiserverRSS), s.apiserverHeap/(1<<20))
}

// contenderCost is what one contender cost the machine.
type contenderCost struct {
	name string
	// rate is the contender's figure in objects/s, as the scale table
	// prints it.
	rate  float64
	start startState
	// window is from the contender's first write to its last, writes the
	// objects it wrote, cpu what each process spent in the window.
	window time.Duration
	writes int64
	cpu    cpuTimes
	// requests are the requests for the population's resource over the
	// contender's whole run, by verb.
	requests map[string]float64
	// client says whose CPU cpu.client is.
	client string
}

// perObject is c's CPU seconds per object written in its window.
func (c contenderCost) perObject() cpuTimes {
	if c.writes <= 0 {
		return cpuTimes{}
	}
	n := float64(c.writes)
	return cpuTimes{apiserver: c.cpu.apiserver / n, etcd: c.cpu.etcd / n, client: c.cpu.client / n}
}

// requestsPerObject prints requests per object of n, by verb, the most
// frequent first.
func requestsPerObject(byVerb map[string]float64, n int) string {
	verbs := make([]string, 0, len(byVerb))
	for verb, count := range byVerb {
		if count > 0 {
			verbs = append(verbs, verb)
		}
	}
	slices.SortFunc(verbs, func(a, b string) int {
		if byVerb[a] != byVerb[b] {
			return map[bool]int{true: -1, false: 1}[byVerb[a] > byVerb[b]]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(verbs))
	for _, verb := range verbs {
		parts = append(parts, fmt.Sprintf("%s %.3g", verb, byVerb[verb]/float64(n)))
	}
	return strings.Join(parts, " ")
}

// writeWindow picks, among etcd revisions sampled in order, the window
// from the last sample before the first write (at revision first) to the
// first sample that saw the last (at revision last). ok is false when the
// samples do not hold both.
func writeWindow(revisions []int64, first, last int64) (from, to int, ok bool) {
	from, to = -1, -1
	for i, r := range revisions {
		if r < first {
			from = i
		}
		if r >= last && to < 0 {
			to = i
		}
	}
	return from, to, from >= 0 && to > from
}

// machineLimit is the machine's limit in objects/s: cpus over the least
// API server and etcd CPU seconds per object any contender caused (zero
// figures, from contenders not measured, ignored); 0 when none was.
func machineLimit(cpus int, serverPerObject []float64) float64 {
	least := 0.0
	for _, s := range serverPerObject {
		if s > 0 && (least == 0 || s < least) {
			least = s
		}
	}
	if least == 0 {
		return 0
	}
	return float64(cpus) / least
}

// meterSample is one sample of a meter.
type meterSample struct {
	at       time.Time
	revision int64
	cpu      cpuTimes
}

// meter measures one contender; stop it with stop, on every path.
type meter struct {
	b     *bench
	group string
	// client finds the client's pid, once it runs.
	client     func() (int, error)
	clientName string
	clientPID  int
	apiserver  int
	etcd       int
	start      startState
	before     map[string]float64
	// stopping ends the sampling after the sample under way: a request
	// cancelled midway would have etcd's client log a warning.
	stopping  chan struct{}
	done      chan struct{}
	samples   []meterSample
	sampleErr error
}

// startMeter reads the control plane's state and starts sampling while a
// contender on the widgets of group runs; client finds the pid of the
// process the contender runs in (clientName names it in the report).
func (b *bench) startMeter(ctx context.Context, group, clientName string, client func() (int, error)) (*meter, error) {
	m := &meter{b: b, group: group, client: client, clientName: clientName, stopping: make(chan struct{}), done: make(chan struct{})}
	var err error
	if m.apiserver, err = childPID("kube-apiserver"); err != nil {
		return nil, err
	}
	if m.etcd, err = childPID("etcd"); err != nil {
		return nil, err
	}
	if m.start, m.before, err = b.controlPlaneState(ctx, group); err != nil {
		return nil, err
	}
	// The first sample is taken before the contender starts, the last
	// after it ended (stop).
	if err := m.take(ctx); err != nil {
		return nil, err
	}
	go m.sample(ctx)
	return m, nil
}

// sample samples every meterEvery until stopped or ctx ends.
func (m *meter) sample(ctx context.Context) {
	defer close(m.done)
	tick := time.NewTicker(meterEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.stopping:
			return
		case <-tick.C:
		}
		if err := m.take(ctx); err != nil {
			if ctx.Err() == nil {
				m.sampleErr = err
			}
			return
		}
	}
}

// take takes one sample. A client that exited keeps the CPU of its last
// sample, at most meterEvery before its exit.
func (m *meter) take(ctx context.Context) error {
	s := meterSample{at: time.Now()}
	status, err := m.b.etcdStatus(ctx)
	if err != nil {
		return err
	}
	s.revision = status.Header.Revision
	if s.cpu.apiserver, err = procCPU(m.apiserver); err == nil {
		s.cpu.etcd, err = procCPU(m.etcd)
	}
	if err != nil {
		return err
	}
	if m.clientPID == 0 {
		m.clientPID, _ = m.client()
	}
	if len(m.samples) > 0 {
		s.cpu.client = m.samples[len(m.samples)-1].cpu.client
	}
	if m.clientPID != 0 {
		if c, err := procCPU(m.clientPID); err == nil {
			s.cpu.client = c
		}
	}
	m.samples = append(m.samples, s)
	return nil
}

// stop ends the sampling and returns the contender's cost over its
// window, with rate, the contender's figure.
func (m *meter) stop(ctx context.Context, name string, rate float64) (contenderCost, error) {
	close(m.stopping)
	<-m.done
	if m.sampleErr == nil {
		m.sampleErr = m.take(ctx)
	}
	if m.sampleErr != nil {
		return contenderCost{}, fmt.Errorf("sample the CPU of %s: %w", name, m.sampleErr)
	}
	cost := contenderCost{name: name, rate: rate, start: m.start, client: m.clientName}
	_, after, err := m.b.controlPlaneState(ctx, m.group)
	if err != nil {
		return cost, err
	}
	cost.requests = map[string]float64{}
	for verb, count := range after {
		cost.requests[verb] = count - m.before[verb]
	}
	if len(m.samples) == 0 {
		return cost, fmt.Errorf("%s: no sample", name)
	}
	written, firstWrite, lastWrite, err := m.b.writtenSince(ctx, m.group, m.samples[0].revision)
	if err != nil {
		return cost, err
	}
	revisions := make([]int64, len(m.samples))
	for i, s := range m.samples {
		revisions[i] = s.revision
	}
	from, to, ok := writeWindow(revisions, firstWrite, lastWrite)
	if !ok {
		return cost, fmt.Errorf("%s: its writes (revisions %d to %d) are not within its samples' (%d to %d)", name, firstWrite, lastWrite,
			revisions[0], revisions[len(revisions)-1])
	}
	first, last := m.samples[from], m.samples[to]
	cost.window, cost.writes, cost.cpu = last.at.Sub(first.at), written, last.cpu.minus(first.cpu)
	return cost, nil
}

// writtenSince counts the widgets of group etcd stored after revision, and
// the least and the greatest revision they were written at.
func (b *bench) writtenSince(ctx context.Context, group string, revision int64) (n, first, last int64, err error) {
	etcd := b.env.Etcd
	prefix := fmt.Sprintf("%s/%s/widgets/", etcd.Prefix, group)
	since := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithMinModRev(revision + 1)}
	count, err := etcd.Client().Get(ctx, prefix, append(since, clientv3.WithCountOnly())...)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("count the widgets written: %w", err)
	}
	if count.Count == 0 {
		return 0, 0, 0, fmt.Errorf("no widget of %s written since revision %d", group, revision)
	}
	edge := func(order clientv3.SortOrder) (int64, error) {
		resp, err := etcd.Client().Get(ctx, prefix, append(since, clientv3.WithKeysOnly(), clientv3.WithLimit(1),
			clientv3.WithSort(clientv3.SortByModRevision, order))...)
		if err != nil || len(resp.Kvs) != 1 {
			return 0, fmt.Errorf("the widgets' first or last write: %v (%d keys)", err, len(resp.Kvs))
		}
		return resp.Kvs[0].ModRevision, nil
	}
	if first, err = edge(clientv3.SortAscend); err != nil {
		return 0, 0, 0, err
	}
	last, err = edge(clientv3.SortDescend)
	return count.Count, first, last, err
}

// printCost prints a contender's cost on n objects as the section goes.
func printCost(c contenderCost, n int) {
	per := c.perObject()
	fmt.Printf("  at its start: %s\n", c.start)
	fmt.Printf("  between its first and last write (%s, %d objects, %.0f/s), CPU ms per object: kube-apiserver %.2f, etcd %.2f, client (%s) %.2f; requests per object: %s\n",
		c.window.Round(100*time.Millisecond), c.writes, float64(c.writes)/c.window.Seconds(), 1000*per.apiserver, 1000*per.etcd, c.client,
		1000*per.client, requestsPerObject(c.requests, n))
}

// controlPlaneState reads the control plane's startState and the requests
// for the widgets of group so far, by verb.
func (b *bench) controlPlaneState(ctx context.Context, group string) (startState, map[string]float64, error) {
	var s startState
	status, err := b.etcdStatus(ctx)
	if err != nil {
		return s, nil, err
	}
	s.etcdDB, s.etcdInUse = status.DbSize, status.DbSizeInUse
	if s.sinceCompaction, err = b.sinceCompaction(ctx); err != nil {
		return s, nil, err
	}
	pid, err := childPID("kube-apiserver")
	if err != nil {
		return s, nil, err
	}
	if s.apiserverRSS, _, err = procStatus(pid); err != nil {
		return s, nil, err
	}
	families, err := envtestutil.APIServerMetrics(ctx, b.cfg)
	if err != nil {
		return s, nil, err
	}
	if heap := families["go_memstats_heap_inuse_bytes"].GetMetric(); len(heap) > 0 {
		s.apiserverHeap = heap[0].GetGauge().GetValue()
	}
	return s, envtestutil.RequestsByVerb(families, group, "widgets"), nil
}

// etcdStatus is the status of the control plane's etcd.
func (b *bench) etcdStatus(ctx context.Context) (*clientv3.StatusResponse, error) {
	endpoints := b.env.Etcd.Client().Endpoints()
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("etcd's client has no endpoint")
	}
	status, err := b.env.Etcd.Client().Status(ctx, endpoints[0])
	if err != nil {
		return nil, fmt.Errorf("etcd's status: %w", err)
	}
	return status, nil
}

// sinceCompaction is the time since etcd's last compaction, by its own
// gauge (the API server asks for one every --etcd-compaction-interval, 5
// minutes by default); negative when it made none since it started.
func (b *bench) sinceCompaction(ctx context.Context) (time.Duration, error) {
	u := *b.env.Environment.ControlPlane.Etcd.URL
	u.Path = "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("read etcd's metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("read etcd's metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		return 0, fmt.Errorf("parse etcd's metrics: %w", err)
	}
	last := families["etcd_debugging_mvcc_db_compaction_last"].GetMetric()
	if len(last) == 0 {
		return 0, fmt.Errorf("etcd reports no etcd_debugging_mvcc_db_compaction_last")
	}
	at := last[0].GetGauge().GetValue()
	if at == 0 {
		return -1, nil
	}
	return time.Since(time.Unix(int64(at), 0)), nil
}

// procCPU is the CPU time pid spent, user and system, in seconds, from
// /proc/PID/stat.
func procCPU(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return cpuOfStat(string(data))
}

// cpuOfStat reads utime and stime (fields 14 and 15, in clock ticks) from a
// /proc/PID/stat line. The command name, field 2, is in parentheses and may
// hold spaces: the fields are counted after its closing one.
func cpuOfStat(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in %q", stat)
	}
	fields := strings.Fields(stat[i+1:])
	// fields[0] is field 3 (state): utime is fields[11], stime fields[12].
	if len(fields) < 13 {
		return 0, fmt.Errorf("too few fields in %q", stat)
	}
	var ticks float64
	for _, f := range fields[11:13] {
		t, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse %q of %q: %w", f, stat, err)
		}
		ticks += float64(t)
	}
	return ticks / clockTicks, nil
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// rowLimit is the machine's limit in row r's round, in objects/s.
func rowLimit(r scaleRow, cpus int) float64 {
	server := make([]float64, 0, len(r.costs))
	for _, c := range r.costs {
		server = append(server, c.perObject().server())
	}
	return machineLimit(cpus, server)
}

// printLimits prints, for each round of each N, the machine's limit and
// each contender's rate as a fraction of it beside its ratio to the
// ceiling, with its CPU per object; then, for each N, the CLI's figures as
// means over the rounds, both orders alike, against their targets.
func printLimits(rows []scaleRow) {
	cpus := runtime.NumCPU()
	fmt.Printf("\nthe machine's limit: %d CPUs / the least kube-apiserver + etcd CPU per object of the round's contenders; CPU ms per object between each contender's first and last write (/proc/PID/stat; client: the bench's own process for the in-process ceiling, the CLI's, the manager's):\n", cpus)
	fmt.Printf("%9s %5s %7s %8s  %-9s %8s %8s %8s %9s %8s %9s %8s\n", "N", "round", "first", "limit/s", "contender", "obj/s", "of limit",
		"/ceiling", "apisrv ms", "etcd ms", "client ms", "window/s")
	for _, r := range rows {
		limit, first := rowLimit(r, cpus), map[bool]string{true: "ceiling", false: "CLI"}[r.ceilingFirst]
		for _, c := range r.costs {
			per := c.perObject()
			fmt.Printf("%9d %5d %7s %8.0f  %-9s %8.0f %8.2f %8.2f %9.2f %8.2f %9.2f %8.0f\n", r.n, r.round+1, first, limit, c.name, c.rate,
				fraction(c.rate, limit), fraction(c.rate, r.ceiling), 1000*per.apiserver, 1000*per.etcd, 1000*per.client,
				float64(c.writes)/c.window.Seconds())
		}
	}
	fmt.Printf("\nthe CLI, means over each N's rounds (targets: >= %.2f of the machine's limit, >= %.2f x the ceiling, client CPU per object <= the ceiling's):\n",
		limitTarget, ceilingTarget)
	for _, n := range uniqueNs(rows) {
		var ofLimit, ofCeiling, cliCPU, ceilingCPU []float64
		ceilingFirst := 0
		for _, r := range rows {
			if r.n != n {
				continue
			}
			if r.ceilingFirst {
				ceilingFirst++
			}
			limit := rowLimit(r, cpus)
			ofLimit, ofCeiling = append(ofLimit, fraction(r.cli, limit)), append(ofCeiling, fraction(r.cli, r.ceiling))
			for _, c := range r.costs {
				switch c.name {
				case "CLI":
					cliCPU = append(cliCPU, c.perObject().client)
				case "ceiling":
					ceilingCPU = append(ceilingCPU, c.perObject().client)
				}
			}
		}
		rounds := len(ofLimit)
		againstCeiling := metOrMissed(mean(ofCeiling) >= ceilingTarget)
		if ceilingFirst < roundsEachOrder || rounds-ceilingFirst < roundsEachOrder {
			againstCeiling = fmt.Sprintf("no verdict: fewer than %d rounds of each order", roundsEachOrder)
		}
		fmt.Printf("%9d: %d rounds (ceiling first in %d, CLI first in %d): %.2f of the limit (%s), %.2f x the ceiling (%s), client CPU %.2f ms per object against the ceiling's %.2f (%s)\n",
			n, rounds, ceilingFirst, rounds-ceilingFirst, mean(ofLimit), metOrMissed(mean(ofLimit) >= limitTarget),
			mean(ofCeiling), againstCeiling,
			1000*mean(cliCPU), 1000*mean(ceilingCPU), metOrMissed(mean(cliCPU) <= mean(ceilingCPU)))
	}
}

// The CLI's targets against the machine's limit and, as the mean of both
// orders, against the ceiling.
const limitTarget, ceilingTarget = 0.90, 1.1

// roundsEachOrder is the rounds of each order a verdict against the
// ceiling takes: one order favours one contender, and a user's loop runs
// in either.
const roundsEachOrder = 2

func fraction(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func mean(fs []float64) float64 {
	if len(fs) == 0 {
		return 0
	}
	var sum float64
	for _, f := range fs {
		sum += f
	}
	return sum / float64(len(fs))
}

// uniqueNs are the rows' Ns, each once, ascending.
func uniqueNs(rows []scaleRow) []int {
	var ns []int
	for _, r := range rows {
		if !slices.Contains(ns, r.n) {
			ns = append(ns, r.n)
		}
	}
	slices.Sort(ns)
	return ns
}
