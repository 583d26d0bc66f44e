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

package envtestutil

import (
	"errors"
	"io"
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// forwarder forwards the TCP connections of a local port, each to the
// target pick chooses for it, and TLS passes through untouched (a
// certificate for the target's host still fits). Two optional delays: hold
// keeps each new connection waiting before it is forwarded, lag delivers
// every byte from the target that long after it left (lagging forwarders
// only, whose answers are copied chunk by chunk). SlowProxy, LagProxy and
// Balancer are its three uses.
type forwarder struct {
	listener  net.Listener
	pick      func() string
	lagging   bool
	hold, lag atomic.Int64
	wg        sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	count map[string]int
	// held, while set, is closed by release: the bytes a lagging forwarder
	// reads meanwhile wait for it, then their lag.
	held chan struct{}
}

// startForwarder listens on a free port of 127.0.0.1 and forwards each
// connection to pick's target.
func startForwarder(pick func() string, lagging bool) (*forwarder, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &forwarder{listener: l, pick: pick, lagging: lagging, conns: map[net.Conn]struct{}{}, count: map[string]int{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

// Addr is where clients connect (host:port).
func (f *forwarder) Addr() string { return f.listener.Addr().String() }

// Connections returns how many connections went to each target.
func (f *forwarder) Connections() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.count)
}

// Close stops listening, closes every forwarded connection and waits until
// every goroutine of the forwarder ended.
func (f *forwarder) Close() error {
	f.release()
	err := f.listener.Close()
	f.mu.Lock()
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	return err
}

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		conn, err := f.listener.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		target := f.pick()
		f.mu.Lock()
		f.conns[conn] = struct{}{}
		f.count[target]++
		f.mu.Unlock()
		f.wg.Add(1)
		go f.forward(conn, target)
	}
}

func (f *forwarder) track(c net.Conn, add bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if add {
		f.conns[c] = struct{}{}
	} else {
		delete(f.conns, c)
	}
}

// forward copies both ways until either side closes.
func (f *forwarder) forward(client net.Conn, target string) {
	defer f.wg.Done()
	defer f.track(client, false)
	defer func() { _ = client.Close() }()
	time.Sleep(time.Duration(f.hold.Load()))
	upstream, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return // the target is down: the client sees the connection close
	}
	f.track(upstream, true)
	defer f.track(upstream, false)
	defer func() { _ = upstream.Close() }()
	done := make(chan struct{}, 3)
	go func() { _, _ = io.Copy(upstream, client); done <- struct{}{} }()
	if f.lagging {
		go f.copyLate(client, upstream, done)
	} else {
		go func() { _, _ = io.Copy(client, upstream); done <- struct{}{} }()
	}
	<-done
}

// chunk is bytes read from the target, due at the client at due, once
// after is closed (when held).
type chunk struct {
	data  []byte
	due   time.Time
	after <-chan struct{}
}

// gate is what a byte read now waits for before its lag: nil when not held.
func (f *forwarder) gate() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held
}

func (f *forwarder) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held != nil {
		close(f.held)
		f.held = nil
	}
}

// copyLate copies upstream's bytes to client, each chunk lag after it was
// read, in order, and signals done when either side ends.
func (f *forwarder) copyLate(client, upstream net.Conn, done chan<- struct{}) {
	late := make(chan chunk, 4096)
	go func() {
		defer close(late)
		for {
			buf := make([]byte, 32<<10)
			n, err := upstream.Read(buf)
			if n > 0 {
				late <- chunk{data: buf[:n], due: time.Now().Add(time.Duration(f.lag.Load())), after: f.gate()}
			}
			if err != nil {
				return
			}
		}
	}()
	failed := false
	for c := range late {
		if failed {
			continue // drained, so that the reader never blocks
		}
		if c.after != nil {
			<-c.after
		}
		time.Sleep(time.Until(c.due))
		if _, err := client.Write(c.data); err != nil {
			failed = true
			done <- struct{}{}
		}
	}
	if !failed {
		done <- struct{}{}
	}
}

// SlowProxy forwards to one target, holding each new connection for a
// delay first: a slow server (a conversion webhook under load, say) as its
// clients see it.
type SlowProxy struct{ *forwarder }

// StartSlowProxy listens on a free port of 127.0.0.1 and forwards to
// target, without delay until SetDelay.
func StartSlowProxy(target string) (*SlowProxy, error) {
	f, err := startForwarder(func() string { return target }, false)
	if err != nil {
		return nil, err
	}
	return &SlowProxy{f}, nil
}

// SetDelay holds every new connection for d before it is forwarded.
func (p *SlowProxy) SetDelay(d time.Duration) { p.hold.Store(int64(d)) }

// LagProxy forwards to one target whose answers arrive late: every byte
// from the target reaches the client SetDelay after it left the target, in
// order, while the client's bytes go through at once. In front of etcd it
// makes an API server see etcd as it was a while ago: its watches (the
// CRD's among them) deliver late, and so does every reply, while its
// writes land in etcd at once. That is an API server learning a storage
// switch late.
type LagProxy struct{ *forwarder }

// StartLagProxy listens on a free port of 127.0.0.1 and forwards to target.
func StartLagProxy(target string) (*LagProxy, error) {
	f, err := startForwarder(func() string { return target }, true)
	if err != nil {
		return nil, err
	}
	return &LagProxy{f}, nil
}

// SetDelay sets the lag of the bytes the target sends from now on.
func (p *LagProxy) SetDelay(d time.Duration) { p.lag.Store(int64(d)) }

// Hold keeps every byte the target sends from now on until Release, in
// order: the client sees the target as it was when Hold was called, for as
// long as a test needs, however slow the machine.
func (p *LagProxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = make(chan struct{})
	}
}

// Release lets the bytes held since Hold go on, then their lag.
func (p *LagProxy) Release() { p.release() }

// Balancer is a TCP balancer in front of several servers, as a load
// balancer in front of an HA control plane: each new connection goes to the
// next server, round robin. A client that keeps one connection (HTTP/2)
// sticks to one server; one that opens several (HTTP/1.1, a pool of them)
// spreads its requests. Connections says how many went to each.
type Balancer struct {
	*forwarder
	targets []string

	mu   sync.Mutex
	next int
	// pinned connections still go to pinnedTo (Pin).
	pinned   int
	pinnedTo string
}

// StartBalancer listens on a free port of 127.0.0.1 in front of targets.
func StartBalancer(targets ...string) (*Balancer, error) {
	b := &Balancer{targets: targets}
	f, err := startForwarder(b.pick, false)
	if err != nil {
		return nil, err
	}
	b.forwarder = f
	return b, nil
}

// Pin sends the next n connections to target, and the ones after them
// round robin from the target after it.
func (b *Balancer) Pin(target string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, t := range b.targets {
		if t == target {
			b.next = i + 1
			b.pinned, b.pinnedTo = n, t
		}
	}
}

// pick is the target of a new connection.
func (b *Balancer) pick() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pinned > 0 {
		b.pinned--
		return b.pinnedTo
	}
	t := b.targets[b.next%len(b.targets)]
	b.next++
	return t
}
