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

package migration_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/creack/pty"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/test/envtestutil"
)

// terminal is the CLI running in a pseudo-terminal, as a person runs it:
// what it draws is in out, escape sequences and all.
type terminal struct {
	cmd  *exec.Cmd
	out  *gbytes.Buffer
	read chan struct{}
}

func startInTerminal(args ...string) *terminal {
	binary, kubeconfig := buildCLI()
	cmd := exec.Command(binary, append(args, "--kubeconfig", kubeconfig)...)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 220})
	Expect(err).NotTo(HaveOccurred())
	t := &terminal{cmd: cmd, out: gbytes.NewBuffer(), read: make(chan struct{})}
	go func() {
		defer close(t.read)
		defer func() { _ = tty.Close() }()
		// Reading ends with EIO once the CLI exits and the terminal closes.
		_, _ = io.Copy(io.MultiWriter(t.out, GinkgoWriter), tty)
	}()
	DeferCleanup(func() {
		if t.cmd.ProcessState == nil {
			_ = t.cmd.Process.Kill()
			_ = t.cmd.Wait()
		}
	})
	return t
}

// wait returns the exit code once the CLI exited and its output is read.
func (t *terminal) wait() int {
	done := make(chan error, 1)
	go func() { done <- t.cmd.Wait() }()
	var err error
	Eventually(done).WithTimeout(2 * time.Minute).Should(Receive(&err))
	Eventually(t.read).WithTimeout(10 * time.Second).Should(BeClosed())
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	Expect(err).NotTo(HaveOccurred())
	return 0
}

var _ = Describe("The graduator CLI a person watches", Ordered, func() {
	var binary, kubeconfig string
	BeforeAll(func() { binary, kubeconfig = buildCLI() })

	run := func(args ...string) *gexec.Session {
		session, err := gexec.Start(exec.Command(binary, append(args, "--kubeconfig", kubeconfig)...), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(session).WithTimeout(2 * time.Minute).Should(gexec.Exit())
		return session
	}
	snapshotFile := func() string { return filepath.Join(GinkgoT().TempDir(), "before.json.gz") }

	Describe("migrate", func() {
		It("draws a bar on a terminal whose total is the number of objects, with a percent, counting objects as they are written", func(ctx SpecContext) {
			const n, pageSize = 150, 50
			f := newFixture(ctx, n)
			f.switchStorage(ctx)

			// --qps 50 makes the run last about two seconds: eight redraws.
			t := startInTerminal("migrate", f.crd.Name, "--page-size", fmt.Sprint(pageSize), "--qps", "50")
			Expect(t.wait()).To(BeZero())
			screen := string(t.out.Contents())
			bars := regexp.MustCompile(`migrating `+regexp.QuoteMeta(f.crd.Name)+` \[[=> ]+\] +(\d+)% (\d+)/(\d+) `).FindAllStringSubmatch(screen, -1)
			Expect(bars).NotTo(BeEmpty(), "a bar is drawn:\n%s", screen)
			midPage := 0
			for _, bar := range bars {
				Expect(bar[3]).To(Equal(fmt.Sprint(n)), "every bar's total is the number of objects: %s", bar[0])
				if done, _ := strconv.Atoi(bar[2]); done%pageSize != 0 {
					midPage++
				}
			}
			Expect(midPage).To(BeNumerically(">", 0), "objects count as they are written, not a page at a time:\n%s", screen)
			Expect(bars[len(bars)-1][1:3]).To(Equal([]string{"100", fmt.Sprint(n)}), "the last bar is full")
			Expect(screen).To(ContainSubstring("\r"), "the bar is redrawn in place")
			Expect(screen).To(MatchRegexp(`ETA \d+`))
			Expect(screen).To(MatchRegexp(`writers \d+  failed 0`))
			Expect(screen).To(ContainSubstring(fmt.Sprintf("%s: %d listed, %d rewritten as v2", f.crd.Name, n, n)), "then the summary")
		})

		It("prints a plain line a page off a terminal, a JSON object a page with -o json, and only the summary with --quiet", func(ctx SpecContext) {
			const n = 60
			f := newFixture(ctx, n)
			f.switchStorage(ctx)

			plain := run("migrate", f.crd.Name, "--page-size", "20")
			Expect(plain.ExitCode()).To(BeZero())
			lines := strings.Split(strings.TrimSpace(string(plain.Err.Contents())), "\n")
			name := regexp.QuoteMeta(f.crd.Name)
			// First what the run waits for: the short settle after the one
			// API server was found serving v2.
			Expect(lines[0]).To(MatchRegexp(`^` + name + `: waiting for every API server to store v2 before migrating: the one API server .* so far$`))
			lines = lines[1:]
			Expect(lines).To(ContainElement(MatchRegexp(`^` + name + `: 20/60 \(33%\), 20 rewritten, 0 skipped, 0 failed, \d+ writers, \d+ objects/s`)))
			// A line a page of progress (two pages done at once make one),
			// then one as the catch-up sweep starts and one as it ends.
			Expect(len(lines)).To(BeNumerically("<=", n/20+2), "at most a line a page:\n%s", plain.Err.Contents())
			Expect(lines[len(lines)-3:]).To(HaveExactElements(
				MatchRegexp(`^`+name+`: 60/60 \(100%\), 60 rewritten, 0 skipped, 0 failed, \d+ writers, \d+ objects/s, ETA 0s$`),
				Equal(f.crd.Name+": every listed object done; catch-up sweep of the objects written during the run started"),
				Equal(f.crd.Name+": catch-up sweep done: 0 objects written during the run caught up")))
			Expect(string(plain.Err.Contents())).NotTo(ContainSubstring("catching up"), "no repeated sweep lines")
			Expect(string(plain.Err.Contents())).NotTo(ContainSubstring("\r"), "no bar")
			Expect(string(plain.Out.Contents())).To(ContainSubstring(fmt.Sprintf("%d listed, %d rewritten", n, n)))

			// Later runs write every object again (a CLI run takes its own
			// checkpoint), which is as good as any run for the other forms.
			asJSON := run("migrate", f.crd.Name, "--page-size", "20", "-o", "json")
			Expect(asJSON.ExitCode()).To(BeZero())
			var records []map[string]any
			scanner := bufio.NewScanner(bytes.NewReader(asJSON.Err.Contents()))
			for scanner.Scan() {
				var r map[string]any
				Expect(json.Unmarshal(scanner.Bytes(), &r)).To(Succeed(), "a JSON object a line: %s", scanner.Text())
				records = append(records, r)
			}
			Expect(len(records)).To(BeNumerically(">=", n/20))
			Expect(records[0]).To(And(HaveKeyWithValue("total", BeEquivalentTo(n)), HaveKeyWithValue("done", BeEquivalentTo(20)),
				HaveKeyWithValue("crd", f.crd.Name)))

			quiet := run("migrate", f.crd.Name, "--page-size", "20", "--quiet")
			Expect(quiet.ExitCode()).To(BeZero())
			Expect(quiet.Err.Contents()).To(BeEmpty(), "nothing on stderr")
			Expect(strings.Split(strings.TrimSpace(string(quiet.Out.Contents())), "\n")).To(HaveExactElements(
				fmt.Sprintf("%s: %d listed, %d rewritten as v2, 0 skipped, 0 failed; 0 written during the run caught up", f.crd.Name, n, n),
				// envtest's API server advertises an address it does not
				// listen on; its one identity Lease and the EndpointSlice's
				// one address say it is alone: asked through the front door.
				HavePrefix("  API servers: the one API server (1 by their identity Leases) serves storage version hash "),
				"status.storedVersions: [v1, v2]",
			), "only the summary")
		})
	})

	Describe("verify", func() {
		It("after a migration that changed nothing reports every object identical and exits 0, as migrate --verify does", func(ctx SpecContext) {
			const n = 60
			f := newFixture(ctx, n)
			file := snapshotFile()
			written := run("verify", f.crd.Name, "--snapshot", file)
			Expect(written.ExitCode()).To(BeZero(), string(written.Err.Contents()))
			Expect(string(written.Out.Contents())).To(ContainSubstring(fmt.Sprintf("%d objects of %s read at v1: snapshot written to %s", n, f.crd.Name, file)))
			f.switchStorage(ctx)

			migrated := run("migrate", f.crd.Name, "--verify", "--prune")
			Expect(migrated.ExitCode()).To(BeZero(), string(migrated.Err.Contents()))
			Expect(string(migrated.Out.Contents())).To(And(
				ContainSubstring(fmt.Sprintf("verified: %d objects identical at v1, v2", n)),
				ContainSubstring("status.storedVersions pruned to [v2]")))
			Expect(f.storedCounts(ctx)).To(Equal(map[string]int{f.group + "/v2": n}))

			verified := run("verify", f.crd.Name, "--against", file)
			Expect(verified.ExitCode()).To(BeZero(), string(verified.Out.Contents()))
			Expect(strings.TrimSpace(string(verified.Out.Contents()))).To(Equal(fmt.Sprintf("%d objects identical", n)))
		})

		It("names exactly the objects changed since the snapshot, with the fields that differ, and exits 1", func(ctx SpecContext) {
			const n = 40
			f := newFixture(ctx, n)
			file := snapshotFile()
			Expect(run("verify", f.crd.Name, "--snapshot", file).ExitCode()).To(BeZero())

			f.switchStorage(ctx)
			Expect(run("migrate", f.crd.Name).ExitCode()).To(BeZero())
			recolored, relabelled, deleted := 7, 22, 31
			for _, i := range []int{recolored, relabelled} {
				ns, name := key(i)
				patch := `{"spec":{"color":"red"}}`
				if i == relabelled {
					patch = `{"metadata":{"labels":{"index":"changed"}}}`
				}
				_, err := dyn.Resource(f.v2).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
				Expect(err).NotTo(HaveOccurred())
			}
			ns, name := key(deleted)
			Expect(dyn.Resource(f.v2).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
			_, err := dyn.Resource(f.v2).Namespace("default").Create(ctx,
				&unstructured.Unstructured{Object: map[string]any{"apiVersion": f.v2.GroupVersion().String(), "kind": "Widget",
					"metadata": map[string]any{"name": "newcomer", "namespace": "default"}, "spec": map[string]any{"color": "blue"}}},
				metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())

			asJSON := run("verify", f.crd.Name, "--against", file, "-o", "json")
			Expect(asJSON.ExitCode()).To(Equal(1), string(asJSON.Err.Contents()))
			found := map[string]string{}
			scanner := bufio.NewScanner(bytes.NewReader(asJSON.Out.Contents()))
			for scanner.Scan() {
				var d struct{ Object, What string }
				Expect(json.Unmarshal(scanner.Bytes(), &d)).To(Succeed())
				if d.Object != "" {
					found[d.Object] = d.What
				}
			}
			name7, name22, name31 := joinKey(key(recolored)), joinKey(key(relabelled)), joinKey(key(deleted))
			Expect(found).To(Equal(map[string]string{name7: "changed", name22: "changed", name31: "missing", "default/newcomer": "added"}),
				"exactly the objects changed on purpose")

			text := run("verify", f.crd.Name, "--against", file)
			Expect(text.ExitCode()).To(Equal(1))
			Expect(string(text.Out.Contents())).To(And(
				// generation is compared: the API server bumps it on a change of spec.
				ContainSubstring(name7+": changed\n  /metadata/generation: 1 -> 2\n  /spec/color: \"blue\" -> \"red\"\n"),
				ContainSubstring(name22+": changed\n  /metadata/labels/index: \"22\" -> \"changed\"\n"),
				ContainSubstring(name31+": only in the snapshot (deleted since)"),
				ContainSubstring("default/newcomer: only in the cluster (created since)"),
				ContainSubstring(fmt.Sprintf("4 objects differ (2 changed, 1 only in the snapshot, 1 only in the cluster), %d identical", n-3))))
			Expect(string(text.Err.Contents())).To(ContainSubstring("4 objects of " + f.crd.Name + " differ from the snapshot"))
		})

		It("exits 2 on bad input: an unknown CRD or version, a file that is not a snapshot, bad flags", func(ctx SpecContext) {
			f := newFixture(ctx, 3)
			notSnapshot := filepath.Join(GinkgoT().TempDir(), "notes.txt")
			Expect(os.WriteFile(notSnapshot, []byte("hello"), 0o600)).To(Succeed())
			var gz bytes.Buffer
			zw := gzip.NewWriter(&gz)
			_, _ = zw.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`))
			Expect(zw.Close()).To(Succeed())
			otherKind := filepath.Join(GinkgoT().TempDir(), "configmap.json.gz")
			Expect(os.WriteFile(otherKind, gz.Bytes(), 0o600)).To(Succeed())
			good := snapshotFile()
			Expect(run("verify", f.crd.Name, "--snapshot", good).ExitCode()).To(BeZero())
			for _, tc := range []struct {
				args []string
				says string
			}{
				{[]string{"nothing.example.graduator.io", "--against", good}, `"nothing.example.graduator.io" not found`},
				{[]string{f.crd.Name, "--against", notSnapshot}, "not a snapshot"},
				{[]string{f.crd.Name, "--against", otherKind}, `not a snapshot: its first record is of kind "ConfigMap", a snapshot's is "GraduatorSnapshot"`},
				{[]string{f.crd.Name, "--against", filepath.Join(GinkgoT().TempDir(), "missing.json.gz")}, "no such file"},
				{[]string{f.crd.Name, "--against", good, "--at", "v2"}, "was read at v1: compare at the same version"},
				{[]string{f.crd.Name, "--snapshot", good, "--at", "v9"}, "does not serve version v9"},
				{[]string{f.crd.Name}, "give exactly one of --snapshot FILE"},
				{[]string{f.crd.Name, "--snapshot", good, "--against", good}, "give exactly one of --snapshot FILE"},
				{[]string{f.crd.Name, "--against", good, "--colour"}, "unknown flag: --colour"},
				{[]string{"--against", good}, "accepts 1 arg(s)"},
			} {
				session := run(append([]string{"verify"}, tc.args...)...)
				Expect(session.ExitCode()).To(Equal(2), "verify %v", tc.args)
				Expect(string(session.Err.Contents())).To(ContainSubstring(tc.says), "verify %v", tc.args)
				Expect(string(session.Err.Contents())).NotTo(ContainSubstring("{Kind:"), "no Go struct in an error")
			}
		})
	})

	Describe("status --watch", func() {
		It("redraws when a policy's phase or a CRD changes, and leaves cleanly on Ctrl-C", func(ctx SpecContext) {
			_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
				Paths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfPathMissing: true,
			})
			Expect(err).NotTo(HaveOccurred())
			f := newFixture(ctx, 40)
			policies := dyn.Resource(graduatorv1alpha1.GroupVersion.WithResource("crdversionpolicies"))
			_, err = policies.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": graduatorv1alpha1.GroupVersion.String(), "kind": "CRDVersionPolicy",
				"metadata": map[string]any{"name": f.crd.Name}, "spec": map[string]any{"storageVersion": "v2"},
			}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) { _ = policies.Delete(ctx, f.crd.Name, metav1.DeleteOptions{}) })
			setStatus := func(status string) {
				_, err := policies.Patch(ctx, f.crd.Name, types.MergePatchType, []byte(`{"status":`+status+`}`), metav1.PatchOptions{}, "status")
				Expect(err).NotTo(HaveOccurred())
			}
			setStatus(`{"phase":"SwitchingStorage"}`)

			t := startInTerminal("status", "--watch", "-o", "wide")
			row := func(phase string) string {
				return `(?m)` + regexp.QuoteMeta(f.crd.Name) + ` .*` + phase
			}
			Eventually(t.out).WithTimeout(20 * time.Second).Should(gbytes.Say(row("SwitchingStorage")))

			// 10 of 40 objects done in 10 s: 25%, about 30 s to go.
			setStatus(fmt.Sprintf(`{"phase":"Migrating","migration":{"storageVersion":"v1","listed":20,"rewritten":10,"writers":12,"startedAt":%q}}`,
				time.Now().Add(-10*time.Second).UTC().Format(time.RFC3339)))
			Eventually(t.out).WithTimeout(20*time.Second).Should(gbytes.Say(`\x1b\[2J`), "the screen is cleared and redrawn")
			Eventually(t.out).WithTimeout(20 * time.Second).Should(gbytes.Say(row(`Migrating +10/20 \(25%\) +12 +[23]\ds `)))

			setStatus(`{"phase":"Pruning"}`)
			Eventually(t.out).WithTimeout(20 * time.Second).Should(gbytes.Say(row("Pruning")))

			// A change of the CRD itself redraws too: its storage version and drift.
			Expect(envtestutil.SetStorageVersion(ctx, k8sClient, f.crd.Name, "v2")).To(Succeed())
			Eventually(t.out).WithTimeout(20 * time.Second).Should(gbytes.Say(`(?m)` + regexp.QuoteMeta(f.crd.Name) + ` +v2 +v1,v2 +v1,v2 +- +v1 `))

			Expect(t.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
			Expect(t.wait()).To(BeZero(), "Ctrl-C leaves cleanly")
		})

		It("prints the same data once with -o json and -o yaml, and refuses -w with them", func(ctx SpecContext) {
			f := newFixture(ctx, 0)
			asYAML := run("status", "-o", "yaml")
			Expect(asYAML.ExitCode()).To(BeZero())
			Expect(string(asYAML.Out.Contents())).To(ContainSubstring("- name: " + f.crd.Name))
			watchJSON := run("status", "-w", "-o", "json")
			Expect(watchJSON.ExitCode()).NotTo(BeZero())
			Expect(string(watchJSON.Err.Contents())).To(ContainSubstring("--watch redraws the table"))
		})
	})
})

func joinKey(ns, name string) string { return ns + "/" + name }
