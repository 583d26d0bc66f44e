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

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestSpareGoroutinesRunEachFunctionOnce(t *testing.T) {
	s := newSpareGoroutines()
	const n = 1000
	var ran [n]atomic.Int32
	var wg sync.WaitGroup
	inFlight := make(chan struct{}, 8)
	for i := range n {
		inFlight <- struct{}{}
		wg.Add(1)
		s.run(func() { defer wg.Done(); ran[i].Add(1); <-inFlight })
	}
	wg.Wait()
	s.stop()
	for i := range ran {
		if got := ran[i].Load(); got != 1 {
			t.Fatalf("function %d ran %d times, want once", i, got)
		}
	}
}

// deepStack uses about 20 KiB of stack, as a write through client-go and
// HTTP/2 does.
//
//go:noinline
func deepStack(n int) byte {
	var buf [512]byte
	buf[n%len(buf)] = byte(n)
	if n == 0 {
		return buf[0]
	}
	return deepStack(n-1) + buf[n%len(buf)]
}

// benchmarkWrites runs b.N stack-deep functions, 64 at a time, through
// spawn.
func benchmarkWrites(b *testing.B, spawn func(func())) {
	var wg sync.WaitGroup
	inFlight := make(chan struct{}, 64)
	for range b.N {
		inFlight <- struct{}{}
		wg.Add(1)
		spawn(func() { defer wg.Done(); deepStack(40); <-inFlight })
	}
	wg.Wait()
}

func BenchmarkWritesOnNewGoroutines(b *testing.B) {
	benchmarkWrites(b, func(f func()) { go f() })
}

func BenchmarkWritesOnSpareGoroutines(b *testing.B) {
	s := newSpareGoroutines()
	benchmarkWrites(b, s.run)
	s.stop()
}
