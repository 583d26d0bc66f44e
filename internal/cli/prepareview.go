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

package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/internal/prepare"
	"github.com/graduator/graduator/migration"
)

// fleetView shows `graduator prepare` as it goes, on w (stderr): on a
// terminal one line per cluster, redrawn every redrawEvery, with its
// current CRD, progress, rate and ETA, then its outcome; off a terminal a
// line per event (plan, CRD started, page, CRD done, cluster done);
// nothing with -o json (the outcome has the times).
type fleetView struct {
	w        io.Writer
	mode     progressMode
	mu       sync.Mutex
	clusters []*clusterView
	drawn    int // lines drawn last time (progressBar)
	done     chan struct{}
	stopped  sync.Once
	wg       sync.WaitGroup
}

// clusterView is one cluster's line; it is the driver's Reporter for the
// cluster.
type clusterView struct {
	fleet *fleetView
	name  string
	start time.Time
	live  atomic.Int64

	// guarded by fleet.mu
	crd      string
	index, n int
	last     migration.Progress
	rate     rateMeter
	lastRate float64
	printed  int64
	outcome  string
}

func newFleetView(w io.Writer, targets []cluster, mode progressMode) *fleetView {
	v := &fleetView{w: w, mode: mode, done: make(chan struct{})}
	for _, t := range targets {
		v.clusters = append(v.clusters, &clusterView{fleet: v, name: t.Context, start: time.Now(), outcome: "reading"})
	}
	if mode == progressBar {
		v.wg.Add(1)
		go func() {
			defer v.wg.Done()
			tick := time.NewTicker(redrawEvery)
			defer tick.Stop()
			for {
				select {
				case <-v.done:
					return
				case <-tick.C:
					v.mu.Lock()
					v.draw()
					v.mu.Unlock()
				}
			}
		}()
	}
	return v
}

func (v *fleetView) cluster(i int) *clusterView { return v.clusters[i] }

// stop ends the redraws and leaves every cluster's last line.
func (v *fleetView) stop() {
	v.stopped.Do(func() {
		close(v.done)
		v.wg.Wait()
		v.mu.Lock()
		defer v.mu.Unlock()
		if v.mode == progressBar {
			v.draw()
		}
	})
}

// draw redraws the clusters' lines in place; v.mu is held.
func (v *fleetView) draw() {
	if v.drawn > 0 {
		_, _ = fmt.Fprintf(v.w, "\x1b[%dA", v.drawn)
	}
	width := terminalWidth(v.w) - 1
	for _, c := range v.clusters {
		_, _ = fmt.Fprintf(v.w, "\r%s\x1b[K\n", c.bar(width))
	}
	v.drawn = len(v.clusters)
}

// printf prints an event's line (progressLines only).
func (v *fleetView) printf(format string, args ...any) {
	if v.mode != progressLines {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	_, _ = fmt.Fprintf(v.w, format+"\n", args...)
}

// line is the cluster's line off a terminal: its outcome, or its current
// CRD's progress.
func (c *clusterView) line() string {
	if c.crd == "" {
		return fmt.Sprintf("%s: %s", c.name, c.outcome)
	}
	f := figuresOf(c.last, c.live.Load(), c.lastRate)
	return fmt.Sprintf("%s: CRD %d/%d %s", c.name, c.index+1, c.n, renderLine(c.crd, c.last, f))
}

// bar is the cluster's line on a terminal, width columns at most: its
// outcome, or its current CRD's progress bar with rate and ETA.
func (c *clusterView) bar(width int) string {
	if c.crd == "" {
		return truncate(fmt.Sprintf("%s: %s", c.name, c.outcome), width)
	}
	prefix := fmt.Sprintf("%s: CRD %d/%d ", c.name, c.index+1, c.n)
	f := figuresOf(c.last, c.live.Load(), c.lastRate)
	return prefix + renderBar(c.crd, c.last, f, max(width-len(prefix), 20), false)
}

func (c *clusterView) planned(p prepare.Plan) {
	c.fleet.mu.Lock()
	c.n = len(p.CRDs)
	c.outcome = fmt.Sprintf("%d CRDs to migrate, %d refused, %d findings reported", p.Migrations(), len(p.CRDs)-p.Migrations(), len(p.Reported))
	c.fleet.mu.Unlock()
	c.fleet.printf("%s: plan: %s", c.name, c.outcome)
	for _, crd := range p.CRDs {
		c.fleet.printf("%s: %s %s: %s", c.name, crd.Verdict, crd.CRD, strings.Join(crd.Why, "; "))
	}
}

func (c *clusterView) started(i int, crd string) {
	c.fleet.mu.Lock()
	c.crd, c.index, c.last, c.printed, c.rate = crd, i, migration.Progress{Remaining: -1}, 0, rateMeter{}
	c.live.Store(0)
	c.fleet.mu.Unlock()
	c.fleet.printf("%s: %s: started", c.name, crd)
}

func (c *clusterView) crdDone(crd PreparedCRD) {
	c.fleet.mu.Lock()
	c.crd = ""
	c.outcome = fmt.Sprintf("%s %s", crd.CRD, crd.Outcome)
	c.fleet.mu.Unlock()
	why := ""
	if crd.Refused != "" {
		why = ": " + crd.Refused
	}
	c.fleet.printf("%s: %s: %s, %d rewritten, %d skipped, %d failed, storedVersions [%s]%s", c.name, crd.CRD, crd.Outcome,
		crd.Rewritten, crd.Skipped, crd.Failed, strings.Join(crd.StoredVersions, ", "), why)
}

func (c *clusterView) finished(pc PreparedCluster) {
	c.fleet.mu.Lock()
	c.crd, c.outcome = "", pc.Outcome
	if pc.Why != "" {
		c.outcome += ": " + pc.Why
	}
	c.fleet.mu.Unlock()
	c.fleet.printf("%s: %s", c.name, c.outcome)
}

// progress is the engine's OnProgress: a page done.
func (c *clusterView) progress(p migration.Progress) {
	c.fleet.mu.Lock()
	c.last = p
	done := p.Done()
	c.lastRate = c.rate.add(time.Since(c.start), max(done, c.live.Load()))
	print := !p.CatchUp && done > c.printed
	if print {
		c.printed = done
	}
	line := c.line()
	c.fleet.mu.Unlock()
	if print {
		c.fleet.printf("%s", line)
	}
}

// object is the engine's OnObject: one object done.
func (c *clusterView) object() { c.live.Add(1) }

// Event prints the driver's Events (a step's outcome) as lines.
func (c *clusterView) Event(_ *graduatorv1alpha1.CRDVersionPolicy, crd *apiextensionsv1.CustomResourceDefinition,
	_, reason, _, message string) {
	name := ""
	if crd != nil {
		name = crd.Name + ": "
	}
	c.fleet.printf("%s: %s%s: %s", c.name, name, reason, message)
}

// Planned is the driver's plan of each step; the lines show the Events.
func (*clusterView) Planned(*graduatorv1alpha1.CRDVersionPolicy, graduation.Step, graduatorv1alpha1.Phase) {
}

// printPrepared is the summary: per cluster its outcome, then its CRDs and
// what is reported, not acted on.
func printPrepared(w io.Writer, contexts []string, out map[string]PreparedCluster) {
	for _, name := range contexts {
		pc := out[name]
		line := name + ": " + pc.Outcome
		if pc.Outcome == OutcomeReady && len(pc.CRDs) == 0 {
			line += " (nothing to do)"
		}
		if pc.Why != "" && pc.Error != nil {
			line += ": " + pc.Why
		}
		_, _ = fmt.Fprintln(w, line)
		if pc.Outcome == OutcomeRefused && len(pc.CRDs) > 0 && pc.Why != "" && clusterWhy(pc.CRDs) != pc.Why {
			_, _ = fmt.Fprintln(w, "  refused: "+pc.Why)
		}
		for _, c := range pc.CRDs {
			s := fmt.Sprintf("  %s: %s", c.CRD, c.Outcome)
			switch c.Outcome {
			case OutcomeReady:
				if c.Verdict == prepare.Rollback {
					s += fmt.Sprintf(": rolled back from %s", c.From)
				}
				s += fmt.Sprintf(": %d rewritten as %s, %d skipped; storedVersions pruned to [%s]", c.Rewritten, c.StorageVersion,
					c.Skipped, strings.Join(c.StoredVersions, ", "))
			case OutcomePlanned:
				s += ": " + plannedSteps(c.CRDPlan) + ", because " + strings.Join(c.Why, "; ")
			default:
				s += ": " + c.Refused
			}
			_, _ = fmt.Fprintln(w, s)
		}
		for _, f := range pc.Reported {
			_, _ = fmt.Fprintf(w, "  reported, not acted on: %s %s %s: %s\n", f.CRD, f.Severity, f.Rule, f.Why)
		}
	}
}

// plannedSteps says what prepare will do to a CRD, in order.
func plannedSteps(p prepare.CRDPlan) string {
	var steps []string
	switch p.ServeFrom {
	case prepare.ServeFromCluster:
		steps = append(steps, fmt.Sprintf("serve %s (its schema from the cluster's CRD)", p.StorageVersion))
	case prepare.ServeFromRelease:
		steps = append(steps, fmt.Sprintf("add %s as the release defines it, served", p.StorageVersion))
	}
	if p.Verdict != prepare.Rollback {
		return strings.Join(append(steps, fmt.Sprintf("migrate to %s and prune", p.StorageVersion)), ", ")
	}
	steps = append(steps, fmt.Sprintf("prove %s -> %s -> %s (a loss refuses, unless --accept-loss names it)", p.From, p.StorageVersion, p.From),
		fmt.Sprintf("make %s the storage version", p.StorageVersion),
		fmt.Sprintf("rewrite every object as %s", p.StorageVersion),
		fmt.Sprintf("prune storedVersions to [%s]", p.StorageVersion))
	s := "roll back from " + p.From + " to " + p.StorageVersion + ": " + strings.Join(steps, ", ")
	if p.Webhook != "" {
		s += fmt.Sprintf(", reading through the conversion webhook %s, which must keep running until the rewrite ends", p.Webhook)
	}
	return s
}
