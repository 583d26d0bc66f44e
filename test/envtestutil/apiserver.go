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
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// APIServer is one more kube-apiserver beside an envtest control plane's,
// as in an HA control plane: the same etcd (or a path to it), the same
// serving certificate, client CA and service-account keys, so that one
// kubeconfig reaches every server, and a token one issues another accepts.
type APIServer struct {
	// Address is host:port it serves on.
	Address string
	cmd     *exec.Cmd
	done    chan error
	dir     string
}

// APIServerOptions place one more API server.
type APIServerOptions struct {
	// IP it binds: on loopback, 127.0.0.2, 127.0.0.3, ... The port is the
	// envtest server's: the kubernetes Service's endpoints have one port
	// for every API server.
	IP string
	// EtcdURL is where it reaches etcd: the envtest etcd's, or a proxy in
	// front of it.
	EtcdURL string
	// Out receives its log.
	Out io.Writer
}

// StartAPIServer starts one more kube-apiserver from the envtest binaries
// beside env's, and waits until it is ready. Stop it with Stop; it also
// dies with the test process (a parent-death signal), killed or not.
func StartAPIServer(env *envtest.Environment, opts APIServerOptions) (*APIServer, error) {
	first := env.ControlPlane.APIServer
	if first == nil || first.Port == "" {
		return nil, errors.New("the envtest control plane is not started")
	}
	binary := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-apiserver")
	dir, err := os.MkdirTemp("", "envtest-apiserver-")
	if err != nil {
		return nil, err
	}
	port := first.Port
	certs := first.CertDir
	args := map[string]string{
		// The flags envtest gives its own server, with this one's address.
		"bind-address":                     opts.IP,
		"secure-port":                      port,
		"etcd-servers":                     opts.EtcdURL,
		"cert-dir":                         dir,
		"tls-cert-file":                    filepath.Join(certs, "apiserver.crt"),
		"tls-private-key-file":             filepath.Join(certs, "apiserver.key"),
		"service-account-issuer":           first.SecureServing.URL("https", "/").String(),
		"service-account-key-file":         filepath.Join(certs, "sa-signer.crt"),
		"service-account-signing-key-file": filepath.Join(certs, "sa-signer.key"),
		"service-cluster-ip-range":         "10.0.0.0/24",
		"allow-privileged":                 "true",
		"disable-admission-plugins":        "ServiceAccount",
		"authorization-mode":               "RBAC",
	}
	// What the suite and envtest's authentication set (the client CA, the
	// watch cache, ...), unless set above.
	for _, a := range first.Configure().AsStrings(nil) {
		key, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if _, ok := args[key]; !ok {
			args[key] = value
		}
	}
	var flags []string
	for k, v := range args {
		flags = append(flags, "--"+k+"="+v)
	}
	cmd := exec.Command(binary, flags...)
	cmd.Stdout, cmd.Stderr = opts.Out, opts.Out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start kube-apiserver on %s: %w", opts.IP, err)
	}
	s := &APIServer{Address: net.JoinHostPort(opts.IP, port), cmd: cmd, done: make(chan error, 1), dir: dir}
	go func() {
		s.done <- cmd.Wait()
		_ = os.RemoveAll(dir)
	}()
	if err := s.waitReady(first.CA, time.Minute); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// waitReady polls /readyz until the server answers ok.
func (s *APIServer) waitReady(ca []byte, timeout time.Duration) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	// /readyz is open to anyone (system:public-info-viewer); the name is
	// the certificate's.
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}}}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+s.Address+"/readyz", nil)
		if resp, err := c.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-s.done:
			s.done <- err
			return fmt.Errorf("kube-apiserver on %s exited: %v", s.Address, err)
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver on %s was not ready within %s", s.Address, timeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM, then SIGKILL after 10 s, and waits for the exit.
func (s *APIServer) Stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		s.done <- <-s.done
	}
}
