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

package migration

// spareGoroutines runs each write on a goroutine an earlier write left
// idle, or on a new one when none is. A goroutine started for each write
// grows its stack anew through client-go and HTTP/2 (from 2 KiB, copied at
// each doubling): a CPU profile of `graduator migrate` put that at a tenth
// of what a write costs the client. There are never more goroutines than
// writes were once in flight at the same time.
type spareGoroutines struct {
	idle chan func()
}

func newSpareGoroutines() *spareGoroutines {
	return &spareGoroutines{idle: make(chan func())}
}

// run runs f on an idle goroutine, or on a new one.
func (s *spareGoroutines) run(f func()) {
	select {
	case s.idle <- f:
	default:
		go s.serve(f)
	}
}

// serve runs f, then each function run hands it, until stop.
func (s *spareGoroutines) serve(f func()) {
	for ok := true; ok; f, ok = <-s.idle {
		f()
	}
}

// stop ends the idle goroutines. Call it once no run is under way or to
// come.
func (s *spareGoroutines) stop() { close(s.idle) }
