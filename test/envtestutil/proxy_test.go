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
	"bufio"
	"errors"
	"net"
	"testing"
)

// echo serves each connection's lines back until the test ends; its name
// is its address.
func echo(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			go func() {
				defer func() { _ = c.Close() }()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// roundTrip sends a line through addr and reads it back.
func roundTrip(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || got != "ping\n" {
		t.Fatalf("read %q, %v; want ping", got, err)
	}
}

// TestForwarders: each use of the forwarder carries bytes both ways and
// closes; the balancer spreads connections round robin after a pin.
func TestForwarders(t *testing.T) {
	a, b := echo(t), echo(t)
	slow, err := StartSlowProxy(a)
	if err != nil {
		t.Fatal(err)
	}
	slow.SetDelay(0)
	roundTrip(t, slow.Addr())
	lag, err := StartLagProxy(a)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, lag.Addr())
	bal, err := StartBalancer(a, b)
	if err != nil {
		t.Fatal(err)
	}
	bal.Pin(b, 2)
	for range 4 {
		roundTrip(t, bal.Addr())
	}
	// two pinned to b, then a and b in turn from the target after b
	if got := bal.Connections(); got[a] != 1 || got[b] != 3 {
		t.Errorf("Connections = %v, want 1 to %s and 3 to %s", got, a, b)
	}
	for _, c := range []interface{ Close() error }{slow, lag, bal} {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}
