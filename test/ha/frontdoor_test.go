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

package ha_test

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/graduator/graduator/test/envtestutil"
)

// From a laptop or a CI runner, the addresses a managed control plane lists
// in its kubernetes EndpointSlice are private: the connection is refused,
// or its packets are dropped. The servers are still three (the slice lists
// three addresses; each renews its identity Lease), and the balancer is the
// one address that reaches them.
var _ = Describe("Three API servers whose addresses cannot be dialled from here, one learning the storage switch late", func() {
	for _, tc := range []struct {
		name string
		// addresses lists three addresses at the servers' port where no
		// API server answers.
		addresses func() []string
	}{
		{"connections refused", func() []string { return []string{"127.0.0.4", "127.0.0.5", "127.0.0.6"} }},
		{"connections that never answer, as dropped packets", silentAddresses},
	} {
		Context("with "+tc.name, func() {
			BeforeEach(func(ctx SpecContext) {
				listAddresses(ctx, tc.addresses()...)
				DeferCleanup(listServers)
			})

			It("graduator migrate --prune asks through the front door and leaves nothing stored in the old version", func(ctx SpecContext) {
				f := newFixture(ctx)
				start := time.Now()
				switchLate(ctx, f.crd.Name)
				startOnA()
				session := runCLI("migrate", f.crd.Name, "--prune", "-o", "json")
				GinkgoWriter.Printf("migrate --prune took %s\n", time.Since(start).Round(time.Millisecond))
				Expect(session.ExitCode()).To(BeZero(), string(session.Err.Contents()))
				var summary struct {
					Pruned     bool
					APIServers string
				}
				Expect(json.Unmarshal(session.Out.Contents(), &summary)).To(Succeed())
				Expect(summary.Pruned).To(BeTrue())
				f.expectGraduated(ctx)
				Expect(summary.APIServers).To(MatchRegexp(`^23 answers through the front door on fresh connections, all at the new hash: ` +
					`a late one of 3 API servers \(3 [^)]*\) missed with probability 8\.9e-05`))
				Expect(summary.APIServers).To(ContainSubstring("3 of 3 API servers cannot be asked one by one from here"))
			})

			It("graduator prepare asks through the front door and leaves nothing stored in the old version", func(ctx SpecContext) {
				f := newFixture(ctx)
				release := releaseDroppingV1(f)
				start := time.Now()
				switchLate(ctx, f.crd.Name)
				startOnA()
				session := runCLI("prepare", "--against", release, "-o", "json")
				GinkgoWriter.Printf("prepare took %s\n", time.Since(start).Round(time.Millisecond))
				Expect(session.ExitCode()).To(BeZero(), string(session.Err.Contents()))
				var clusters map[string]struct {
					Outcome string
					CRDs    []struct {
						CRD, Outcome, APIServers string
					}
				}
				Expect(json.Unmarshal(session.Out.Contents(), &clusters)).To(Succeed(), string(session.Out.Contents()))
				Expect(clusters).To(HaveLen(1))
				for _, c := range clusters {
					Expect(c.Outcome).To(Equal("Ready"))
					Expect(c.CRDs).To(ConsistOf(HaveField("APIServers", ContainSubstring("answers through the front door"))))
				}
				f.expectGraduated(ctx)
			})
		})
	}
})

// runCLI runs the CLI through the balancer until it exits.
func runCLI(args ...string) *gexec.Session {
	cmd := exec.Command(cliBinary, append(args, "--kubeconfig", kubeconfig)...)
	// One connection per request in flight, spread by the balancer.
	cmd.Env = append(os.Environ(), "DISABLE_HTTP2=true")
	session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	EventuallyWithOffset(1, session).WithTimeout(3 * time.Minute).Should(gexec.Exit())
	return session
}

// releaseDroppingV1 writes the release that drops f's v1: its CRD serves
// and stores v2 only.
func releaseDroppingV1(f *fixture) string {
	crd := envtestutil.WidgetCRD(f.group, "v2")
	crd.APIVersion, crd.Kind = apiextensionsv1.SchemeGroupVersion.String(), "CustomResourceDefinition"
	data, err := yaml.Marshal(crd)
	Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(GinkgoT().TempDir(), "release.yaml")
	Expect(os.WriteFile(path, data, 0o600)).To(Succeed())
	return path
}

// silentAddresses listens on three loopback addresses at the servers' port
// and never answers: a dial succeeds, then nothing comes back, as from an
// address whose packets are dropped. Closed when the spec ends.
func silentAddresses() []string {
	_, port, err := net.SplitHostPort(servers[0])
	Expect(err).NotTo(HaveOccurred())
	ips := []string{"127.0.0.7", "127.0.0.8", "127.0.0.9"}
	var mu sync.Mutex
	var held []net.Conn
	for _, ip := range ips {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, port))
		Expect(err).NotTo(HaveOccurred())
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		}()
		DeferCleanup(func() {
			_ = l.Close()
			mu.Lock()
			defer mu.Unlock()
			for _, c := range held {
				_ = c.Close()
			}
		})
	}
	return ips
}
