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
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// A run's pictures: the knee (rate against fixed writer counts) and, for a
// run of the engine at its defaults, its limit, its rate and the
// foreground's rate over time. They are written as PNG into -plots.

// series is one line of a plot.
type series struct {
	name string
	xy   plotter.XYs
}

// savePlot draws lines on one plot and writes it to dir/file.
func savePlot(dir, file, title, x, y string, lines ...series) error {
	if dir == "" {
		return nil
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	var args []any
	for _, l := range lines {
		if len(l.xy) > 0 {
			args = append(args, l.name, l.xy)
		}
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return fmt.Errorf("plot %s: %w", file, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, file)
	if err := p.Save(18*vg.Centimeter, 10*vg.Centimeter, path); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	fmt.Printf("  (plot written: %s)\n", path)
	return nil
}

// kneePlot draws the curve section's rates against writers, a line per
// object size.
func (b *bench) kneePlot() error {
	var lines []series
	for _, p := range b.knee {
		i := slices.IndexFunc(lines, func(s series) bool { return s.name == p.size })
		if i < 0 {
			lines = append(lines, series{name: p.size})
			i = len(lines) - 1
		}
		lines[i].xy = append(lines[i].xy, plotter.XY{X: float64(p.writers), Y: p.rate})
	}
	return savePlot(b.opts.plots, "knee.png", "The engine at fixed writer counts (the knee)", "writers in flight", "objects/s", lines...)
}

// timelinePlots draws a run's trace: the rates in one picture, the limit in
// another.
func (b *bench) timelinePlots(name, title string, t *trace, foreground *counter) error {
	rates := []series{{name: "engine, objects/s", xy: t.objects.rates()}}
	if foreground != nil {
		rates = append(rates, series{name: "foreground, writes/s", xy: foreground.rates()})
	}
	if err := savePlot(b.opts.plots, name+"-rate.png", title+": rates", "seconds", "per second", rates...); err != nil {
		return err
	}
	return savePlot(b.opts.plots, name+"-limit.png", title+": the engine's writer limit", "seconds", "writers allowed in flight",
		series{name: "limit", xy: t.steps()})
}

// pacedPlots draws the paced client's latency over a run beside the engine
// (the p50 and the highest of each half second, and its p99 alone as a
// line), and the engine's limit meanwhile.
func (b *bench) pacedPlots(name, title string, t *trace, during, alone *latencies) error {
	aloneP99 := float64(alone.quantile(0.99)) / float64(time.Millisecond)
	p50, most := during.overTime(0.5), during.overTime(1)
	var flat plotter.XYs
	if len(most) > 0 {
		flat = plotter.XYs{{X: 0, Y: aloneP99}, {X: most[len(most)-1].X, Y: aloneP99}}
	}
	if err := savePlot(b.opts.plots, name+"-latency.png", title+": its write latency", "seconds", "milliseconds",
		series{name: "p50 each half second", xy: p50}, series{name: "highest each half second", xy: most},
		series{name: "p99 alone", xy: flat}); err != nil {
		return err
	}
	return savePlot(b.opts.plots, name+"-limit.png", title+": the engine's writer limit", "seconds", "writers allowed in flight",
		series{name: "limit", xy: t.steps()})
}
