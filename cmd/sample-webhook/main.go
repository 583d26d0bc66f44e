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

// Command sample-webhook serves the conversion webhook of the sample Pizza
// API (restaurant.example.com), over TLS only.
package main

import (
	"context"
	"errors"
	"flag"
	"net/http"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/graduator/graduator/webhooks"
)

func main() {
	var (
		certDir   string
		port      int
		probeAddr string
		http2     bool
	)
	flag.StringVar(&certDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs",
		"Directory with tls.crt and tls.key; reloaded when the files change.")
	flag.IntVar(&port, "port", 9443, "Port the webhook listens on (TLS).")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081",
		"Address of the /healthz and /readyz endpoints (plain HTTP).")
	flag.BoolVar(&http2, "enable-http2", false,
		"Let clients negotiate HTTP/2. Off by default because of the HTTP/2 rapid-reset and stream-cancellation "+
			"vulnerabilities; the API server converts over HTTP/1.1.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("sample-webhook")

	server, err := webhooks.NewConversionServer(webhooks.Options{Port: port, CertDir: certDir, EnableHTTP2: http2})
	if err != nil {
		log.Error(err, "unable to create the webhook server")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()

	probes := http.NewServeMux()
	probes.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	probes.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := server.StartedChecker()(r); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	probeServer := &http.Server{Addr: probeAddr, Handler: probes, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := probeServer.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "probe server failed")
		}
	}()

	log.Info("serving conversions", "port", port, "path", webhooks.ConvertPath, "certDir", certDir)
	if err := server.Start(ctx); err != nil {
		log.Error(err, "the webhook server stopped with an error")
		os.Exit(1)
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = probeServer.Shutdown(shutdown)
	log.Info("stopped")
}
