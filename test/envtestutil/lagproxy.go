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
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// LagProxy is a TCP proxy whose answers arrive late: every byte from the
// target reaches the client SetDelay after it left the target, in order,
// while the client's bytes go through at once. In front of etcd it makes
// an API server see etcd as it was a while ago: its watches (the CRD's
// among them) deliver late, and so does every reply, while its writes land
// in etcd at once. That is an API server learning a storage switch late.
type LagProxy struct {
	target   string
	listener net.Listener
	delay    atomic.Int64
	wg       sync.WaitGroup
	// held, while set, is closed by Release: bytes read meanwhile wait for
	// it, then their delay.
	held chan struct{}

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// StartLagProxy listens on a free port of 127.0.0.1 and forwards to target.
func StartLagProxy(target string) (*LagProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &LagProxy{target: target, listener: l, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is where clients connect.
func (p *LagProxy) Addr() string { return p.listener.Addr().String() }

// SetDelay sets the lag of the bytes the target sends from now on.
func (p *LagProxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

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

// Release lets the bytes held since Hold go on, then their delay.
func (p *LagProxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
}

// gate is what a byte read now waits for before its delay: nil when not
// held.
func (p *LagProxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

func (p *LagProxy) serve() {
	defer p.wg.Done()
	for {
		conn, err := p.listener.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		p.track(conn, true)
		p.wg.Add(1)
		go p.forward(conn)
	}
}

func (p *LagProxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

// chunk is bytes read from the target, due at the client at due, once
// after is closed (when held).
type chunk struct {
	data  []byte
	due   time.Time
	after <-chan struct{}
}

func (p *LagProxy) forward(client net.Conn) {
	defer p.wg.Done()
	defer p.track(client, false)
	defer func() { _ = client.Close() }()
	upstream, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	p.track(upstream, true)
	defer p.track(upstream, false)
	defer func() { _ = upstream.Close() }()
	done := make(chan struct{}, 3)
	go func() { _, _ = io.Copy(upstream, client); done <- struct{}{} }()
	late := make(chan chunk, 4096)
	go func() {
		defer close(late)
		for {
			buf := make([]byte, 32<<10)
			n, err := upstream.Read(buf)
			if n > 0 {
				late <- chunk{data: buf[:n], due: time.Now().Add(time.Duration(p.delay.Load())), after: p.gate()}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
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
	}()
	<-done
}

// Close stops listening and closes every connection.
func (p *LagProxy) Close() error {
	p.Release()
	err := p.listener.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// Balancer is a TCP balancer in front of several servers, as a load
// balancer in front of an HA control plane: each new connection goes to the
// next server, round robin. A client that keeps one connection (HTTP/2)
// sticks to one server; one that opens several (HTTP/1.1, a pool of them)
// spreads its requests.
type Balancer struct {
	targets  []string
	listener net.Listener
	next     atomic.Uint64
	wg       sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	count map[string]int
	// pinned connections still go to pinnedTo (Pin).
	pinned   int
	pinnedTo string
}

// StartBalancer listens on a free port of 127.0.0.1 in front of targets.
func StartBalancer(targets ...string) (*Balancer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Balancer{targets: targets, listener: l, conns: map[net.Conn]struct{}{}, count: map[string]int{}}
	b.wg.Add(1)
	go b.serve()
	return b, nil
}

// Addr is where clients connect.
func (b *Balancer) Addr() string { return b.listener.Addr().String() }

// Pin sends the next n connections to target, and the ones after them
// round robin from the target after it.
func (b *Balancer) Pin(target string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, t := range b.targets {
		if t == target {
			b.next.Store(uint64(i + 1))
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
	return b.targets[(b.next.Add(1)-1)%uint64(len(b.targets))]
}

// Connections returns how many connections went to each server.
func (b *Balancer) Connections() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for k, v := range b.count {
		out[k] = v
	}
	return out
}

func (b *Balancer) serve() {
	defer b.wg.Done()
	for {
		conn, err := b.listener.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		target := b.pick()
		b.track(conn, true)
		b.mu.Lock()
		b.count[target]++
		b.mu.Unlock()
		b.wg.Add(1)
		go b.forward(conn, target)
	}
}

func (b *Balancer) track(c net.Conn, add bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if add {
		b.conns[c] = struct{}{}
	} else {
		delete(b.conns, c)
	}
}

func (b *Balancer) forward(client net.Conn, target string) {
	defer b.wg.Done()
	defer b.track(client, false)
	defer func() { _ = client.Close() }()
	upstream, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	b.track(upstream, true)
	defer b.track(upstream, false)
	defer func() { _ = upstream.Close() }()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(upstream, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, upstream); done <- struct{}{} }()
	<-done
}

// Close stops listening and closes every connection.
func (b *Balancer) Close() error {
	err := b.listener.Close()
	b.mu.Lock()
	for c := range b.conns {
		_ = c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
	return err
}
