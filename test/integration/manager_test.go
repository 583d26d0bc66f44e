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

package integration

import (
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

var _ = Describe("The manager binary", func() {
	It("serves its probes and exits cleanly on SIGTERM", func(ctx SpecContext) {
		binary, err := gexec.Build("github.com/graduator/graduator/cmd/manager")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(gexec.CleanupBuildArtifacts)

		kubeconfigPath := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(env.WriteKubeconfig(envtest.User{Name: "manager-smoke", Groups: []string{"system:masters"}}, kubeconfigPath)).To(Succeed())

		probeAddr := freeLocalAddr()
		cmd := exec.Command(binary,
			"--kubeconfig", kubeconfigPath,
			"--metrics-bind-address", freeLocalAddr(),
			"--health-probe-bind-address", probeAddr,
			"--leader-elect",
			"--leader-election-namespace", "default",
		)
		session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { session.Kill() })

		for _, probe := range []string{"/healthz", "/readyz"} {
			Eventually(func() (int, error) {
				if session.ExitCode() != -1 {
					return 0, StopTrying(fmt.Sprintf("the manager exited with code %d", session.ExitCode()))
				}
				resp, err := http.Get(fmt.Sprintf("http://%s%s", probeAddr, probe))
				if err != nil {
					return 0, err
				}
				defer func() { _ = resp.Body.Close() }()
				return resp.StatusCode, nil
			}).WithTimeout(30*time.Second).Should(Equal(http.StatusOK), "probe %s", probe)
		}

		session.Signal(syscall.SIGTERM)
		Eventually(session).WithTimeout(30 * time.Second).Should(gexec.Exit(0))
		Expect(session.Err).To(gbytes.Say("the manager stopped"))
	})
})

// freeLocalAddr returns a loopback address with a port nobody listens on.
func freeLocalAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}
