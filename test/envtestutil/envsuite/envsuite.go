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

// Package envsuite is the bootstrap every Ginkgo envtest suite of Graduator
// shares: RunSpecs in the suite's Test function and Start in its
// BeforeSuite. It is kept apart from envtestutil, which the benchmark binary
// imports, because importing Ginkgo registers its flags.
package envsuite

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/graduator/graduator/test/envtestutil"
)

// cleanupMargin is the time left, between Ginkgo's suite timeout and go
// test's -timeout, for the cleanup to stop every process.
const cleanupMargin = 90 * time.Second

// RunSpecs runs the suite's specs as ginkgo.RunSpecs does, except when go
// test's -timeout would end the run before Ginkgo's own suite timeout: then
// Ginkgo's timeout ends it cleanupMargin earlier. Go test's timeout kills
// the process, which leaves kube-apiserver, etcd and the manager running;
// Ginkgo's interrupts the spec and runs every cleanup.
func RunSpecs(t *testing.T, description string) bool {
	gomega.RegisterFailHandler(ginkgo.Fail)
	suiteConfig, reporterConfig := ginkgo.GinkgoConfiguration()
	if deadline, ok := t.Deadline(); ok {
		if left := time.Until(deadline) - cleanupMargin; left > 0 && left < suiteConfig.Timeout {
			suiteConfig.Timeout = left
		}
	}
	return ginkgo.RunSpecs(t, description, suiteConfig, reporterConfig)
}

// startWait bounds how long the cleanup waits for an abandoned Start.
const startWait = 3 * time.Minute

// Start starts the control plane for the suite (call it in BeforeSuite) and
// stops it when the suite ends, whatever the outcome: specs that failed,
// a failed BeforeSuite, an interrupt or the suite timeout. Processes started
// with gexec that are still running then are killed first, and binaries
// built with gexec removed. Controller-runtime's log goes to GinkgoWriter.
func Start(opts envtestutil.Options) *envtestutil.Env {
	ginkgo.GinkgoHelper()
	logf.SetLogger(zap.New(zap.WriteTo(ginkgo.GinkgoWriter), zap.UseDevMode(true)))
	gomega.Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(gomega.BeEmpty(),
		"KUBEBUILDER_ASSETS must point at kube-apiserver and etcd; run the suite with `make test` (or `make envtest-assets` first)")

	// The cleanups are in place before anything starts: an interrupt (or
	// the suite timeout) abandons BeforeSuite where it is, while envtest may
	// be starting kube-apiserver, and runs the cleanups at once. So the stop
	// waits until Start returned, and stops what it started. Cleanups run
	// last in, first out: the processes, then the control plane.
	var env *envtestutil.Env
	started := make(chan struct{})
	ginkgo.DeferCleanup(func() error {
		select {
		case <-started:
		case <-time.After(startWait):
			return errors.New("the control plane did not finish starting: it may be left running")
		}
		if env == nil { // Start failed, and stopped what it had started
			return nil
		}
		return env.Stop()
	})
	ginkgo.DeferCleanup(func() {
		gexec.KillAndWait(10 * time.Second)
		gexec.CleanupBuildArtifacts()
	})
	var err error
	env, err = envtestutil.Start(opts)
	close(started)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return env
}

// StartConversionWebhook runs a conversion webhook binary (built with
// gexec, such as test/roundtripwebhook) with args, a port and a serving
// certificate of its own, until the spec or container that called it ends,
// and returns the client config a CRD reaches it with. The binary takes
// --port and --cert-dir and serves ConversionReviews at /convert.
func StartConversionWebhook(binary string, args ...string) *apiextensionsv1.WebhookClientConfig {
	ginkgo.GinkgoHelper()
	certs := &envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1"}
	gomega.Expect(certs.PrepWithoutInstalling()).To(gomega.Succeed())
	ginkgo.DeferCleanup(certs.Cleanup)
	port := strconv.Itoa(certs.LocalServingPort)
	session, err := gexec.Start(exec.Command(binary, append([]string{"--port", port, "--cert-dir", certs.LocalServingCertDir}, args...)...),
		ginkgo.GinkgoWriter, ginkgo.GinkgoWriter)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	ginkgo.DeferCleanup(func() { session.Terminate().Wait(10 * time.Second) })
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certs.LocalServingCAData)
	gomega.Eventually(func() error {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", net.JoinHostPort("127.0.0.1", port),
			&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		if err == nil {
			_ = conn.Close()
		}
		return err
	}).WithTimeout(20 * time.Second).Should(gomega.Succeed())
	url := "https://" + net.JoinHostPort("127.0.0.1", port) + "/convert"
	return &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: certs.LocalServingCAData}
}
