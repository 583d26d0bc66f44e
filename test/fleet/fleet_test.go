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

package fleet_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	"sigs.k8s.io/yaml"
)

// timeout is each cluster's --request-timeout in the suite.
const timeout = "3s"

// finding and cluster are the JSON of `graduator scan -o json`, as a user
// reads it.
type finding struct {
	CRD, Rule, Severity, Why, Fix string
}

type scanned struct {
	Error *struct {
		Reason, Message string
	}
	Summary    string
	CRDs       int
	NotChecked []string
	Findings   []finding
}

type statusRow struct {
	Name           string
	StorageVersion string
	Drift          []string
	PolicyPhase    string
	Reason         string
}

type statusCluster struct {
	Error *struct {
		Reason, Message string
	}
	Summary string
	CRDs    []statusRow
}

// graduator runs the CLI with KUBECONFIG set to kubeconfigs (a colon list)
// and stdin, and returns its exit code and output.
func graduator(stdin string, kubeconfigs []string, args ...string) (int, string, string) {
	GinkgoHelper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+strings.Join(kubeconfigs, string(filepath.ListSeparator)))
	cmd.Stdin = strings.NewReader(stdin)
	session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	Eventually(session).WithTimeout(time.Minute).Should(gexec.Exit())
	return session.ExitCode(), string(session.Out.Contents()), string(session.Err.Contents())
}

// rules is each finding as "CRD rule", what the table tests compare.
func rules(fs []finding) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, strings.TrimSuffix(f.CRD, "."+group)+" "+f.Rule)
		Expect(f.Why).NotTo(BeEmpty())
		Expect(f.Fix).NotTo(BeEmpty())
	}
	return out
}

// common are the findings of the states every live plane holds.
var common = []string{
	"deprecateds deprecated-version-not-retired",
	"oldstorages deprecated-storage-version",
	"stales stale-stored-versions",
	"webhooks conversion-webhook-no-endpoint",
}

var _ = Describe("graduator scan across contexts", Ordered, ContinueOnFailure, func() {
	var byContext map[string]scanned
	var code int
	var took time.Duration

	BeforeAll(func() {
		start := time.Now()
		var out, errOut string
		code, out, errOut = graduator("", []string{kubeconfig}, "scan", "--all-contexts", "--request-timeout", timeout, "-o", "json")
		took = time.Since(start)
		GinkgoWriter.Printf("scan --all-contexts took %s\n", took)
		Expect(json.Unmarshal([]byte(out), &byContext)).To(Succeed(), out)
		Expect(errOut).To(ContainSubstring("2 of 4 clusters could not be read: hung, plane-c"))
	})

	It("exits 2 when a cluster could not be read, and still shows the others", func() {
		Expect(code).To(Equal(2))
		Expect(byContext).To(HaveLen(4))
	})

	It("finds on plane-a, without Graduator installed, each planted state and a stored version no longer served", func() {
		a := byContext["plane-a"]
		Expect(a.Error).To(BeNil())
		Expect(rules(a.Findings)).To(ConsistOf(append(common,
			"unserveds stale-stored-versions", "unserveds stored-version-not-served")))
		Expect(a.Summary).To(Equal("7 CRDs, 6 findings (3 errors, 2 warnings, 1 info)"))
	})

	It("reports a deprecated version no policy governs as information, with the vendor's release notes to check", func() {
		for _, plane := range []string{"plane-a", "plane-b"} {
			var deprecated finding
			for _, f := range byContext[plane].Findings {
				if f.CRD == "deprecateds."+group {
					deprecated = f
				}
			}
			Expect(deprecated.Severity).To(Equal("info"), plane)
			Expect(deprecated.Fix).To(ContainSubstring("check the release notes of the vendor"), plane)
		}
	})

	It("names the stale versions and what the release that drops them meets", func() {
		var stale finding
		for _, f := range byContext["plane-a"].Findings {
			if f.CRD == "stales."+group {
				stale = f
			}
		}
		Expect(stale.Severity).To(Equal("error"))
		Expect(stale.Why).To(ContainSubstring("status.storedVersions still lists v1 besides the storage version v2: " +
			"a release that drops v1 is refused by the API server, and objects may still be encoded in v1"))
		Expect(stale.Fix).To(ContainSubstring("graduator migrate stales." + group + " --prune"))
	})

	It("finds on plane-b the stalled policy and the failed migration, and not the version a policy retires nor the webhook that has an endpoint", func() {
		b := byContext["plane-b"]
		Expect(b.Error).To(BeNil())
		Expect(rules(b.Findings)).To(ConsistOf(append(common,
			"stalleds policy-stalled", "migrateds storage-version-migration-failed")))
	})

	It("shows the stopped plane as unreachable, and the silent server as a timeout within --request-timeout", func() {
		Expect(byContext["plane-c"].Error).NotTo(BeNil())
		Expect(byContext["plane-c"].Error.Reason).To(Equal("Unreachable"))
		Expect(byContext["hung"].Error).NotTo(BeNil())
		Expect(byContext["hung"].Error.Reason).To(Equal("Timeout"))
		Expect(byContext["hung"].Error.Message).To(ContainSubstring("no answer within " + timeout))
	})

	It("prints a table with a CONTEXT column and a summary line per cluster, and exits 1 on findings at or above --fail-on", func() {
		code, out, _ := graduator("", []string{kubeconfig}, "scan", "--context", "plane-a", "--context", "plane-b", "--request-timeout", timeout)
		Expect(code).To(Equal(1))
		Expect(strings.Fields(strings.SplitN(out, "\n", 2)[0])).To(Equal([]string{"CONTEXT", "CRD", "SEVERITY", "RULE", "WHY", "FIX"}))
		Expect(out).To(ContainSubstring("\nplane-a: 7 CRDs, 6 findings (3 errors, 2 warnings, 1 info)\n"))
		Expect(out).To(MatchRegexp(`\nplane-b: \d+ CRDs, 6 findings \(4 errors, 1 warnings, 1 info\)\n`))
		GinkgoWriter.Printf("scan table:\n%s\n", out)
	})

	It("says what it could not check, with the permission it needs, where the user may only list CRDs (KUBECONFIG lists two files)", func() {
		code, out, _ := graduator("", []string{kubeconfig, narrow}, "scan", "--context", "plane-a-narrow", "-o", "yaml")
		Expect(code).To(Equal(1))
		var got map[string]scanned
		Expect(yaml.Unmarshal([]byte(out), &got)).To(Succeed())
		n := got["plane-a-narrow"]
		Expect(rules(n.Findings)).To(ContainElement("webhooks conversion-webhook-not-checked"))
		Expect(rules(n.Findings)).NotTo(ContainElement("webhooks conversion-webhook-no-endpoint"))
		Expect(n.NotChecked).To(ContainElement(ContainSubstring("needs list on storageversionmigrations.storagemigration.k8s.io")))
	})

	It("with --against a release's manifests on stdin, says where the release would be refused", func() {
		release := newCRD("Stale", v2)
		release.APIVersion, release.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
		data, err := yaml.Marshal(release)
		Expect(err).NotTo(HaveOccurred())
		code, out, _ := graduator(string(data), []string{kubeconfig}, "scan", "--context", "plane-a,plane-b", "--against", "-", "--fail-on", "error", "-o", "json")
		Expect(code).To(Equal(1))
		var got map[string]scanned
		Expect(json.Unmarshal([]byte(out), &got)).To(Succeed())
		for _, name := range []string{"plane-a", "plane-b"} {
			Expect(rules(got[name].Findings)).To(ContainElement("stales release/stored-version-removed"), name)
		}
	})

	It("refuses bad input before reading anything, exit 2", func() {
		code, out, errOut := graduator("", []string{kubeconfig}, "scan", "--context", "plane-a,plane-z")
		Expect(code).To(Equal(2))
		Expect(out).To(BeEmpty())
		Expect(errOut).To(ContainSubstring(`context "plane-z" is not in the kubeconfig`))
		code, _, errOut = graduator("", []string{kubeconfig}, "scan", "--context", "plane-a", "--all-contexts")
		Expect(code).To(Equal(2))
		Expect(errOut).To(ContainSubstring("--context and --all-contexts exclude each other"))
	})

	It("wrote nothing: the API servers' audit logs hold no write by the scan's users", expectNoWrites)
})

// expectNoWrites reads the live planes' audit logs: the planting's writes
// are there (the log records creates), and none by the CLI's users.
func expectNoWrites() {
	for _, p := range planes[:2] {
		crds, err := p.audit.Writes("apiextensions.k8s.io", "customresourcedefinitions")
		Expect(err).NotTo(HaveOccurred())
		Expect(crds).NotTo(BeEmpty(), "the audit log of %s records the planting's writes", p.name)
		for _, user := range []string{scanner, "crd-reader"} {
			writes, err := p.audit.WritesBy(user)
			Expect(err).NotTo(HaveOccurred())
			Expect(writes).To(BeEmpty(), "%s wrote on %s", user, p.name)
		}
	}
}

var _ = Describe("graduator status across contexts", func() {
	It("shows each cluster's CRDs with a summary, the clusters not read as rows with the reason, and exits 1", func() {
		code, out, errOut := graduator("", []string{kubeconfig}, "status", "--all-contexts", "--request-timeout", timeout, "-o", "json")
		Expect(code).To(Equal(1))
		Expect(errOut).To(ContainSubstring("2 of 4 clusters could not be read: hung, plane-c"))
		var got map[string]statusCluster
		Expect(json.Unmarshal([]byte(out), &got)).To(Succeed())
		Expect(got).To(HaveLen(4))
		drift := func(c statusCluster) map[string][]string {
			m := map[string][]string{}
			for _, r := range c.CRDs {
				if len(r.Drift) > 0 {
					m[r.Name] = r.Drift
				}
			}
			return m
		}
		Expect(drift(got["plane-a"])).To(Equal(map[string][]string{"stales." + group: {"v1"}, "unserveds." + group: {"v1"}}))
		Expect(drift(got["plane-b"])).To(Equal(map[string][]string{"stales." + group: {"v1"}}))
		Expect(got["plane-a"].Summary).To(Equal("7 CRDs, 2 with drift, 0 governed by a policy, 0 stalled"))
		Expect(got["plane-b"].Summary).To(MatchRegexp(`^\d+ CRDs, 1 with drift, 2 governed by a policy, 1 stalled$`))
		Expect(got["plane-c"].Error.Reason).To(Equal("Unreachable"))
		Expect(got["hung"].Error.Reason).To(Equal("Timeout"))

		code, out, _ = graduator("", []string{kubeconfig}, "status", "--context", "plane-a,plane-c", "--request-timeout", timeout)
		Expect(code).To(Equal(1))
		Expect(strings.Fields(strings.SplitN(out, "\n", 2)[0])[:2]).To(Equal([]string{"CONTEXT", "CRD"}))
		Expect(out).To(ContainSubstring("\nplane-a: 7 CRDs, 2 with drift"))
		Expect(out).To(ContainSubstring("\nplane-c: not read (Unreachable)"))
		GinkgoWriter.Printf("status table:\n%s\n", out)
		expectNoWrites()
	})
})
