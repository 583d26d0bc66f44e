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
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/api/meta"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/migration"
)

// progressMode is how `graduator migrate` reports progress.
type progressMode int

const (
	// progressBar redraws one line on a terminal.
	progressBar progressMode = iota
	// progressLines prints one plain line a page of progress (CI logs), and
	// one when the catch-up sweep starts and one when it ends.
	progressLines
	// progressJSON prints one JSON object a page.
	progressJSON
	// progressQuiet prints nothing.
	progressQuiet
)

// pickProgressMode: a bar on a terminal, lines otherwise.
func pickProgressMode(w io.Writer, quiet, asJSON bool) progressMode {
	switch {
	case quiet:
		return progressQuiet
	case asJSON:
		return progressJSON
	case isTerminal(w):
		return progressBar
	}
	return progressLines
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// terminalWidth is the width of w when it is a terminal, else 80.
func terminalWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if width, _, err := term.GetSize(int(f.Fd())); err == nil && width > 0 {
			return width
		}
	}
	return 80
}

// figures are the numbers a progress report shows.
type figures struct {
	// Done counts the objects of the main pass handled so far: rewritten,
	// skipped or failed, counted as each is written rather than as its page
	// completes.
	Done int64
	// Total is the objects listed plus the API server's count of objects not
	// listed yet (remainingItemCount), so it follows objects created or
	// deleted during the run; -1 while unknown.
	Total int64
	// Percent of Total done; -1 while Total is unknown.
	Percent float64
	// Rate in objects a second, smoothed over rateWindow.
	Rate float64
	// ETA is the time left at Rate; -1 while unknown.
	ETA time.Duration
}

// figuresOf derives the figures from the engine's last Progress, the live
// count of objects done and the smoothed rate.
func figuresOf(p migration.Progress, done int64, rate float64) figures {
	f := figures{Done: max(done, p.Done()), Total: -1, Percent: -1, Rate: rate, ETA: -1}
	if p.Remaining >= 0 {
		f.Total = max(p.Listed+p.Remaining, f.Done)
	}
	if f.Total > 0 {
		f.Percent = 100 * float64(f.Done) / float64(f.Total)
	} else if f.Total == 0 {
		f.Percent = 100
	}
	switch {
	case f.Total >= 0 && f.Done >= f.Total:
		f.ETA = 0
	case f.Total >= 0 && f.Rate > 0:
		f.ETA = time.Duration(float64(f.Total-f.Done) / f.Rate * float64(time.Second)).Round(time.Second)
	}
	return f
}

// rateWindow is how far back the rate looks: long enough that a page's
// pause does not sag it, short enough to follow the adaptive limit.
const rateWindow = 10 * time.Second

// rateMeter is the rate of objects done over the last rateWindow, from
// samples taken at each redraw; over the whole run while it is shorter,
// counted from its first sample (the first write, or the start).
type rateMeter struct {
	samples []sample
}

type sample struct {
	at   time.Duration // since the start
	done int64
}

// add records that done objects were done at, and returns the rate.
func (m *rateMeter) add(at time.Duration, done int64) float64 {
	if len(m.samples) == 0 {
		m.samples = append(m.samples, sample{})
	}
	m.samples = append(m.samples, sample{at: at, done: done})
	// Keep one sample at or before the window's start.
	for len(m.samples) > 2 && m.samples[1].at <= at-rateWindow {
		m.samples = m.samples[1:]
	}
	first := m.samples[0]
	if at <= first.at {
		return 0
	}
	return float64(done-first.done) / (at - first.at).Seconds()
}

// renderBar is the progress bar's line, at most width columns wide:
//
//	migrating widgets.example.com [=======>        ]  45% 1350/3000  267/s  ETA 6s  writers 12  failed 0
//
// The bar gets the columns the figures leave; it goes first when the
// terminal is narrow, then the name. While the catch-up sweep runs it says
// so; the final bar names the objects caught up only when there were some.
func renderBar(name string, p migration.Progress, f figures, width int, final bool) string {
	var figs []string
	if f.Total >= 0 {
		figs = append(figs, fmt.Sprintf("%3.0f%% %d/%d", math.Floor(f.Percent), f.Done, f.Total))
	} else {
		// The total comes with the first page's remainingItemCount.
		figs = append(figs, fmt.Sprintf("%d done, counting the total", f.Done))
	}
	figs = append(figs, fmt.Sprintf("%.0f/s", f.Rate))
	if f.ETA >= 0 {
		figs = append(figs, "ETA "+f.ETA.String())
	}
	if p.Writers > 0 {
		figs = append(figs, fmt.Sprintf("writers %d", p.Writers))
	} else {
		figs = append(figs, "writers starting")
	}
	figs = append(figs, fmt.Sprintf("failed %d", p.Failed))
	switch {
	case p.CompactionWait != "" && !final:
		figs = append(figs, "waiting for etcd to compact")
	case p.CatchUp && !final:
		figs = append(figs, fmt.Sprintf("catching up %d", p.CaughtUp))
	case p.CaughtUp > 0:
		figs = append(figs, fmt.Sprintf("caught up %d", p.CaughtUp))
	}
	tail := strings.Join(figs, "  ")
	prefix := "migrating " + name + " "
	const minBar = 10
	barWidth := width - len(prefix) - len(tail) - 3 // "[", "]" and a space
	if barWidth < minBar {
		prefix = ""
		barWidth = width - len(tail) - 3
	}
	if barWidth < minBar || f.Total < 0 {
		return truncate(prefix+tail, width)
	}
	filled := int(float64(barWidth) * f.Percent / 100)
	filled = min(max(filled, 0), barWidth)
	bar := strings.Repeat("=", filled)
	if filled < barWidth {
		if filled > 0 {
			bar = bar[:filled-1] + ">"
		}
		bar += strings.Repeat(" ", barWidth-filled)
	}
	return truncate(prefix+"["+bar+"] "+tail, width)
}

func truncate(s string, width int) string {
	if width > 0 && len(s) > width {
		return s[:width]
	}
	return s
}

// renderLine is one plain line a page of progress, for logs:
//
//	widgets.example.com: 1350/3000 (45%), 1350 rewritten, 0 skipped, 0 failed, 12 writers, 267 objects/s, ETA 6s
func renderLine(name string, p migration.Progress, f figures) string {
	done := fmt.Sprintf("%d/?", f.Done)
	if f.Total >= 0 {
		done = fmt.Sprintf("%d/%d (%.0f%%)", f.Done, f.Total, math.Floor(f.Percent))
	}
	line := fmt.Sprintf("%s: %s, %d rewritten, %d skipped, %d failed, %d writers, %.0f objects/s",
		name, done, p.Rewritten, p.Skipped, p.Failed, p.Writers, f.Rate)
	if f.ETA >= 0 {
		line += ", ETA " + f.ETA.String()
	}
	return line
}

// progressRecord is one JSON object a page (`migrate -o json`, on stderr).
type progressRecord struct {
	CRD              string  `json:"crd"`
	Done             int64   `json:"done"`
	Total            int64   `json:"total"`
	Percent          float64 `json:"percent"`
	Listed           int64   `json:"listed"`
	Rewritten        int64   `json:"rewritten"`
	Skipped          int64   `json:"skipped"`
	Failed           int64   `json:"failed"`
	CatchUp          bool    `json:"catchUp"`
	CompactionWait   string  `json:"compactionWait,omitempty"`
	CaughtUp         int64   `json:"caughtUp"`
	Sweep            string  `json:"sweep,omitempty"`
	Writers          int     `json:"writers"`
	ObjectsPerSecond float64 `json:"objectsPerSecond"`
	ETASeconds       float64 `json:"etaSeconds"`
	ElapsedSeconds   float64 `json:"elapsedSeconds"`
}

func progressRecordOf(name string, p migration.Progress, f figures, elapsed time.Duration) progressRecord {
	round := func(v float64) float64 { return math.Round(v*10) / 10 }
	return progressRecord{
		CRD: name, Done: f.Done, Total: f.Total, Percent: round(f.Percent), Listed: p.Listed,
		Rewritten: p.Rewritten, Skipped: p.Skipped, Failed: p.Failed, CatchUp: p.CatchUp, CompactionWait: p.CompactionWait, CaughtUp: p.CaughtUp,
		Sweep:   string(p.SweepMode),
		Writers: p.Writers, ObjectsPerSecond: round(f.Rate), ETASeconds: f.ETA.Seconds(), ElapsedSeconds: round(elapsed.Seconds()),
	}
}

// progressReporter shows a run's progress on w (stderr). On a terminal, a
// bar redrawn every redrawEvery from the objects done so far (the engine's
// OnObject), so the count, rate and ETA move between pages. Off a
// terminal, a line a page that made progress, one when the catch-up sweep
// starts and one when it ends; a JSON object a page with -o json; nothing
// when quiet.
type progressReporter struct {
	w     io.Writer
	mode  progressMode
	name  string
	start time.Time
	now   func() time.Time

	// live counts the main pass's objects done, as each is.
	live atomic.Int64

	mu       sync.Mutex
	last     migration.Progress
	seen     bool
	rate     rateMeter
	lastRate float64
	// printed is the Done of the last line printed (progressLines).
	printed int64
	// sweeping is set once the catch-up sweep started (progressLines);
	// waiting while the run waits for etcd's compaction.
	sweeping bool
	waiting  bool
	// waitWhy is what the run waits for before its first write (a late API
	// server, the settle delay), since waitSince; empty once it writes.
	waitWhy   string
	waitSince time.Time
	// writing is set from the first plan to write on.
	writing bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

const redrawEvery = 250 * time.Millisecond

func newProgressReporter(w io.Writer, crdName string, mode progressMode) *progressReporter {
	r := &progressReporter{w: w, mode: mode, name: crdName, now: time.Now, stop: make(chan struct{}), printed: -1,
		last: migration.Progress{Remaining: -1}} // no total before the first page
	r.start = r.now()
	if mode == progressBar {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			tick := time.NewTicker(redrawEvery)
			defer tick.Stop()
			for {
				select {
				case <-r.stop:
					return
				case <-tick.C:
					r.mu.Lock()
					r.sample()
					switch {
					case r.waitWhy != "":
						r.drawWait()
					case r.seen || r.live.Load() > 0:
						r.draw(false)
					}
					r.mu.Unlock()
				}
			}
		}()
	}
	return r
}

// planned follows the graduation's plans: while the run waits before its
// first write it says what for and since when; once it writes, the rate
// and the ETA count from then, not from the command's start.
func (r *progressReporter) planned(step graduation.Step) {
	r.mu.Lock()
	defer r.mu.Unlock()
	migrated := meta.FindStatusCondition(step.Conditions, graduatorv1alpha1.ConditionMigrated)
	switch {
	case step.Action == graduation.ActionMigrate && !r.writing:
		// The first plan to write (a run going on plans it again).
		if r.waitWhy != "" && r.mode == progressBar {
			_, _ = fmt.Fprintf(r.w, "\r%s\x1b[K\n", r.waitLine()) // the wait's last line stays above the bar
		}
		r.waitWhy, r.writing = "", true
		r.rate = rateMeter{samples: []sample{{at: r.now().Sub(r.start), done: max(r.live.Load(), r.last.Done())}}}
	case migrated != nil && migrated.Reason == graduation.ReasonSettling:
		if r.waitWhy == "" {
			r.waitSince = r.now()
		}
		r.writing = false
		changed := r.waitWhy != migrated.Message
		r.waitWhy = migrated.Message
		if changed && r.mode == progressLines {
			_, _ = fmt.Fprintln(r.w, r.waitLine())
		}
	}
}

// waitLine says what the run waits for and for how long so far; r.mu is
// held.
func (r *progressReporter) waitLine() string {
	return fmt.Sprintf("%s: %s: %s so far", r.name, r.waitWhy, r.now().Sub(r.waitSince).Round(time.Second))
}

// drawWait draws the wait on the bar's line; r.mu is held.
func (r *progressReporter) drawWait() {
	_, _ = fmt.Fprintf(r.w, "\r%s\x1b[K", truncate(r.waitLine(), terminalWidth(r.w)-1))
}

// object is the engine's OnObject: one more object of the main pass done.
// It is called concurrently by the writers.
func (r *progressReporter) object() { r.live.Add(1) }

// sample takes the rate from the objects done now; r.mu is held.
func (r *progressReporter) sample() {
	done := max(r.live.Load(), r.last.Done())
	r.lastRate = r.rate.add(r.now().Sub(r.start), done)
}

// figures are the figures now; r.mu is held.
func (r *progressReporter) figures() figures {
	return figuresOf(r.last, r.live.Load(), r.lastRate)
}

// update is the engine's OnProgress, called each time a page is done.
func (r *progressReporter) update(p migration.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last, r.seen = p, true
	r.sample()
	switch r.mode {
	case progressBar:
		r.printWait(p)
		r.draw(false)
	case progressLines:
		r.printLines(p)
	case progressJSON:
		// A record a page: the page's counts, which a resumed run keeps.
		_ = json.NewEncoder(r.w).Encode(progressRecordOf(r.name, p, figuresOf(p, 0, r.lastRate), r.now().Sub(r.start)))
	}
}

// printLines prints a line for a page that moved the main pass, and one
// when the catch-up sweep starts; r.mu is held.
func (r *progressReporter) printLines(p migration.Progress) {
	// The etcd space budget's waits for a compaction: why, when one starts,
	// and when the writes go on.
	switch {
	case p.CompactionWait != "" && !r.waiting:
		r.waiting = true
		_, _ = fmt.Fprintf(r.w, "%s: %s\n", r.name, p.CompactionWait)
	case p.CompactionWait == "" && r.waiting:
		r.waiting = false
		_, _ = fmt.Fprintf(r.w, "%s: etcd compacted; writing again\n", r.name)
	}
	pageDone := p.Done()
	if !p.CatchUp && pageDone > r.printed {
		r.printed = pageDone
		f := figuresOf(p, pageDone, r.lastRate)
		_, _ = fmt.Fprintln(r.w, renderLine(r.name, p, f))
	}
	// The main pass is done when its last page is (no continue token left);
	// the sweep then starts.
	if !r.sweeping && (p.CatchUp || p.Continue == "") {
		r.sweeping = true
		_, _ = fmt.Fprintf(r.w, "%s: every listed object done; catch-up sweep of the objects written during the run started\n", r.name)
	}
}

// printWait prints, above the bar, why the run waits for etcd's
// compaction when a wait starts: the bar alone says only that it waits.
// r.mu is held.
func (r *progressReporter) printWait(p migration.Progress) {
	if p.CompactionWait != "" && !r.waiting {
		_, _ = fmt.Fprintf(r.w, "\r%s: %s\x1b[K\n", r.name, p.CompactionWait)
	}
	r.waiting = p.CompactionWait != ""
}

// draw redraws the bar; r.mu is held.
func (r *progressReporter) draw(final bool) {
	f := r.figures()
	if final { // the run's own counts, as the summary's
		f = figuresOf(r.last, 0, r.lastRate)
	}
	_, _ = fmt.Fprintf(r.w, "\r%s\x1b[K", renderBar(r.name, r.last, f, terminalWidth(r.w)-1, final))
}

// done stops redrawing and leaves the bar's last state on its line, or
// ends the lines with the sweep's; res is what the run returned.
func (r *progressReporter) done(res migration.Result) {
	close(r.stop)
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.mode == progressBar && (r.seen || r.live.Load() > 0):
		r.last = res.Progress
		r.draw(true)
		_, _ = fmt.Fprintln(r.w)
	case r.mode == progressLines && r.sweeping && res.Complete:
		_, _ = fmt.Fprintf(r.w, "%s: catch-up sweep done: %d objects written during the run caught up\n", r.name, res.CaughtUp)
	case r.mode == progressLines && r.sweeping:
		_, _ = fmt.Fprintf(r.w, "%s: catch-up sweep stopped: %d objects written during the run caught up so far\n", r.name, res.CaughtUp)
	}
}
