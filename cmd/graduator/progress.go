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
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/graduator/graduator/migration"
)

// progressMode is how `graduator migrate` reports progress.
type progressMode int

const (
	// progressBar redraws one line on a terminal.
	progressBar progressMode = iota
	// progressLines prints one plain line a page (CI logs).
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

// figures are the numbers a progress report shows, derived from the
// engine's Progress.
type figures struct {
	// Done counts the objects of done pages: rewritten, skipped or failed.
	Done int64
	// Total is Done plus the API server's count of objects not listed yet
	// (remainingItemCount), so it follows objects created or deleted during
	// the run; -1 while unknown.
	Total int64
	// Percent of Total done; -1 while Total is unknown.
	Percent float64
	// Rate in objects a second since the start.
	Rate float64
	// ETA is the time left at Rate; -1 while unknown.
	ETA time.Duration
}

func figuresOf(p migration.Progress, elapsed time.Duration) figures {
	f := figures{Done: p.Rewritten + p.Skipped + p.Failed, Total: -1, Percent: -1, ETA: -1}
	if p.Remaining >= 0 {
		f.Total = max(p.Listed+p.Remaining, f.Done)
	}
	if elapsed > 0 {
		f.Rate = float64(f.Done) / elapsed.Seconds()
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

// renderBar is the progress bar's line, at most width columns wide:
//
//	migrating widgets.example.com [=======>        ]  45% 1350/3000  267/s  ETA 6s  writers 12  failed 0
//
// The bar gets the columns the figures leave; it goes first when the
// terminal is narrow, then the name.
func renderBar(name string, p migration.Progress, width int, elapsed time.Duration) string {
	f := figuresOf(p, elapsed)
	var figs []string
	if f.Total >= 0 {
		figs = append(figs, fmt.Sprintf("%3.0f%% %d/%d", math.Floor(f.Percent), f.Done, f.Total))
	} else {
		figs = append(figs, fmt.Sprintf("%d/?", f.Done))
	}
	figs = append(figs, fmt.Sprintf("%.0f/s", f.Rate))
	if f.ETA >= 0 {
		figs = append(figs, "ETA "+f.ETA.String())
	}
	figs = append(figs, fmt.Sprintf("writers %d", p.Writers), fmt.Sprintf("failed %d", p.Failed))
	if p.CatchUp {
		figs = append(figs, fmt.Sprintf("catching up %d", p.CaughtUp))
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

// renderLine is one plain line a page, for logs:
//
//	widgets.example.com: 1350/3000 (45%), 1350 rewritten, 0 skipped, 0 failed, 12 writers, 267 objects/s, ETA 6s
func renderLine(name string, p migration.Progress, elapsed time.Duration) string {
	f := figuresOf(p, elapsed)
	done := fmt.Sprintf("%d/?", f.Done)
	if f.Total >= 0 {
		done = fmt.Sprintf("%d/%d (%.0f%%)", f.Done, f.Total, math.Floor(f.Percent))
	}
	line := fmt.Sprintf("%s: %s, %d rewritten, %d skipped, %d failed, %d writers, %.0f objects/s",
		name, done, p.Rewritten, p.Skipped, p.Failed, p.Writers, f.Rate)
	if f.ETA >= 0 {
		line += ", ETA " + f.ETA.String()
	}
	if p.CatchUp {
		line += fmt.Sprintf(", catching up: %d written during the run rewritten", p.CaughtUp)
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
	CaughtUp         int64   `json:"caughtUp"`
	Writers          int     `json:"writers"`
	ObjectsPerSecond float64 `json:"objectsPerSecond"`
	ETASeconds       float64 `json:"etaSeconds"`
	ElapsedSeconds   float64 `json:"elapsedSeconds"`
}

func progressRecordOf(name string, p migration.Progress, elapsed time.Duration) progressRecord {
	f := figuresOf(p, elapsed)
	round := func(v float64) float64 { return math.Round(v*10) / 10 }
	return progressRecord{
		CRD: name, Done: f.Done, Total: f.Total, Percent: round(f.Percent), Listed: p.Listed,
		Rewritten: p.Rewritten, Skipped: p.Skipped, Failed: p.Failed, CatchUp: p.CatchUp, CaughtUp: p.CaughtUp,
		Writers: p.Writers, ObjectsPerSecond: round(f.Rate), ETASeconds: f.ETA.Seconds(), ElapsedSeconds: round(elapsed.Seconds()),
	}
}

// progressReporter shows a run's progress on w (stderr): a bar redrawn
// each page and every redrawEvery on a terminal, so rate and ETA move
// between pages; a line or a JSON object a page otherwise; nothing when
// quiet.
type progressReporter struct {
	w     io.Writer
	mode  progressMode
	name  string
	start time.Time

	mu   sync.Mutex
	last migration.Progress
	seen bool
	stop chan struct{}
	wg   sync.WaitGroup
}

const redrawEvery = 250 * time.Millisecond

func newProgressReporter(w io.Writer, crdName string, mode progressMode) *progressReporter {
	r := &progressReporter{w: w, mode: mode, name: crdName, start: time.Now(), stop: make(chan struct{})}
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
					if r.seen {
						r.draw()
					}
					r.mu.Unlock()
				}
			}
		}()
	}
	return r
}

// update is the engine's OnProgress.
func (r *progressReporter) update(p migration.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last, r.seen = p, true
	elapsed := time.Since(r.start)
	switch r.mode {
	case progressBar:
		r.draw()
	case progressLines:
		_, _ = fmt.Fprintln(r.w, renderLine(r.name, p, elapsed))
	case progressJSON:
		_ = json.NewEncoder(r.w).Encode(progressRecordOf(r.name, p, elapsed))
	}
}

// draw redraws the bar; r.mu is held.
func (r *progressReporter) draw() {
	_, _ = fmt.Fprintf(r.w, "\r%s\x1b[K", renderBar(r.name, r.last, terminalWidth(r.w)-1, time.Since(r.start)))
}

// done stops redrawing and leaves the bar's last state on its line.
func (r *progressReporter) done() {
	close(r.stop)
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mode == progressBar && r.seen {
		r.draw()
		_, _ = fmt.Fprintln(r.w)
	}
}
