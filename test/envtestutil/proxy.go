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

// SlowProxy forwards TCP connections on a local port to a target address,
// holding each new connection for a delay first: a slow server (a
// conversion webhook under load, say) as its clients see it. TLS passes
// through untouched, so a certificate for the target's host still fits.
type SlowProxy struct {
	target   string
	listener net.Listener
	delay    atomic.Int64
	wg       sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// StartSlowProxy listens on a free port of 127.0.0.1 and forwards to
// target, without delay until SetDelay.
func StartSlowProxy(target string) (*SlowProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &SlowProxy{target: target, listener: l, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the proxy's address (host:port).
func (p *SlowProxy) Addr() string { return p.listener.Addr().String() }

// SetDelay holds every new connection for d before it is forwarded.
func (p *SlowProxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

func (p *SlowProxy) serve() {
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

func (p *SlowProxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

// forward copies both ways until either side closes.
func (p *SlowProxy) forward(client net.Conn) {
	defer p.wg.Done()
	defer p.track(client, false)
	defer func() { _ = client.Close() }()
	time.Sleep(time.Duration(p.delay.Load()))
	upstream, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return // the target is down: the client sees the connection close
	}
	p.track(upstream, true)
	defer p.track(upstream, false)
	defer func() { _ = upstream.Close() }()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(upstream, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, upstream); done <- struct{}{} }()
	<-done
}

// Close stops listening, closes every forwarded connection and waits until
// every goroutine of the proxy ended.
func (p *SlowProxy) Close() error {
	err := p.listener.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}
