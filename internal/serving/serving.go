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

// Package serving holds how every server of the project listens: TLS 1.2 at
// least, HTTP/2 off unless asked for, and the metrics endpoint behind the API
// server's authentication and authorization.
package serving

import (
	"crypto/tls"
	"flag"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// TLSOptions returns the TLS settings of the project's servers. HTTP/2 stays
// off unless enableHTTP2: its rapid-reset and stream-cancellation attacks
// (CVE-2023-44487, CVE-2023-39325) let one client exhaust a Go server, and
// nothing the project serves needs multiplexing. Advertising only http/1.1 in
// ALPN is what keeps a client from negotiating h2.
func TLSOptions(enableHTTP2 bool) []func(*tls.Config) {
	opts := []func(*tls.Config){func(c *tls.Config) { c.MinVersion = tls.VersionTLS12 }}
	if !enableHTTP2 {
		opts = append(opts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	return opts
}

// Metrics configures the manager's metrics endpoint.
type Metrics struct {
	// BindAddress is where /metrics listens; "0" turns it off.
	BindAddress string
	// Secure serves HTTPS and lets through only requests whose bearer token
	// the API server authenticates (TokenReview) and authorizes for
	// `get /metrics` (SubjectAccessReview). Off, it is plain HTTP for anyone
	// who reaches the port.
	Secure bool
	// CertDir holds tls.crt and tls.key (reloaded when they change); empty
	// means a self-signed certificate made at start, as kube-controller-manager
	// does for its own metrics.
	CertDir string
	// EnableHTTP2 lets clients negotiate HTTP/2 (see TLSOptions).
	EnableHTTP2 bool
}

// DefaultMetrics is the endpoint the manager serves without flags.
func DefaultMetrics() Metrics { return Metrics{BindAddress: ":8443", Secure: true} }

// BindFlags registers the kubebuilder-style flags of the metrics endpoint,
// defaulting to m's values.
func (m *Metrics) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&m.BindAddress, "metrics-bind-address", m.BindAddress,
		"The address the metrics endpoint binds to (:8443 for HTTPS, :8080 with --metrics-secure=false); \"0\" disables it.")
	fs.BoolVar(&m.Secure, "metrics-secure", m.Secure,
		"Serve metrics over HTTPS to authenticated and authorized clients only (TokenReview and SubjectAccessReview "+
			"for get /metrics). false serves plain HTTP to anyone who reaches the port.")
	fs.StringVar(&m.CertDir, "metrics-cert-dir", m.CertDir,
		"Directory with tls.crt and tls.key for the metrics endpoint, reloaded when they change; a self-signed "+
			"certificate when empty.")
	fs.BoolVar(&m.EnableHTTP2, "enable-http2", m.EnableHTTP2,
		"Let clients of the metrics endpoint negotiate HTTP/2. Off by default because of the HTTP/2 rapid-reset "+
			"and stream-cancellation vulnerabilities.")
}

// ServerOptions returns controller-runtime's options for the endpoint.
func (m Metrics) ServerOptions() metricsserver.Options {
	opts := metricsserver.Options{
		BindAddress:   m.BindAddress,
		SecureServing: m.Secure,
		TLSOpts:       TLSOptions(m.EnableHTTP2),
	}
	if m.Secure {
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
		opts.CertDir = m.CertDir
	}
	return opts
}
