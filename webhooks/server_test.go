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

package webhooks_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"strconv"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graduator/graduator/webhooks"
)

// An HTTP/2-capable client (the API server is one) gets HTTP/1.1 from the
// conversion webhook unless HTTP/2 is enabled, and never less than TLS 1.2.
func TestTheWebhookNegotiatesHTTP2OnlyWhenEnabled(t *testing.T) {
	for _, tc := range []struct {
		enableHTTP2 bool
		want        string
	}{{false, "http/1.1"}, {true, "h2"}} {
		certs := envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1"}
		if err := certs.PrepWithoutInstalling(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = certs.Cleanup() })
		server, err := webhooks.NewConversionServer(webhooks.Options{
			Host: certs.LocalServingHost, Port: certs.LocalServingPort, CertDir: certs.LocalServingCertDir,
			EnableHTTP2: tc.enableHTTP2,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- server.Start(ctx) }()

		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(certs.LocalServingCAData)
		addr := net.JoinHostPort(certs.LocalServingHost, strconv.Itoa(certs.LocalServingPort))
		dial := func(cfg *tls.Config) (*tls.Conn, error) {
			var conn *tls.Conn
			var err error
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if conn, err = tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, cfg); err == nil {
					break
				}
			}
			return conn, err
		}
		conn, err := dial(&tls.Config{RootCAs: pool, NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			t.Fatalf("enableHTTP2=%v: dial: %v", tc.enableHTTP2, err)
		}
		if got := conn.ConnectionState().NegotiatedProtocol; got != tc.want {
			t.Errorf("enableHTTP2=%v: negotiated %q, want %q", tc.enableHTTP2, got, tc.want)
		}
		_ = conn.Close()
		old := &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11} //nolint:gosec // the point of the check
		if _, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, old); err == nil {
			t.Errorf("enableHTTP2=%v: a TLS 1.1 client was served", tc.enableHTTP2)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the server stopped with %v", err)
		}
	}
}
