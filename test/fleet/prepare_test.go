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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/graduator/graduator/internal/access"
	"github.com/graduator/graduator/internal/driver"
	"github.com/graduator/graduator/test/envtestutil"
)

// prepGroup is the group of the release's CRDs in the prepare rig.
const prepGroup = "prepare.example"

// preparer is the user `graduator prepare` runs as: bound to the shipped
// graduator-prepare ClusterRole and the rule of the release's group.
const preparer = "fleet-preparer"

// objectsEnv sizes each stale CRD of the prepare rig (default 300).
const objectsEnv = "GRADUATOR_PREPARE_OBJECTS"

// parallelEnv, set, runs the parallel timing with this many objects per
// cluster (the target's 20000).
const parallelEnv = "GRADUATOR_PREPARE_PARALLEL"

// parallelCPUEnv, set with parallelEnv (in cores, such as 0.6), caps each
// cluster's API server and etcd at that share of this machine's CPU (a
// cgroup v1 CPU quota; root only), as if each cluster ran on a machine of
// its own: the clusters no longer take the cores from each other.
const parallelCPUEnv = "GRADUATOR_PREPARE_CPU"

func objectsPerCRD() int {
	if n, err := strconv.Atoi(os.Getenv(objectsEnv)); err == nil && n > 0 {
		return n
	}
	return 300
}

// prepared is `graduator prepare -o json`'s cluster, as a user reads it.
type prepared struct {
	Outcome, Why string
	Error        *struct{ Reason, Message string }
	CRDs         []struct {
		CRD, Verdict, Outcome, Refused     string
		Rewritten, Skipped, Failed, Listed int64
		Pruned                             bool
		StoredVersions                     []string
		StartedAt, FinishedAt              *time.Time
	}
	Reported []finding
}

// prepCRD is "<kind lower>s.prepare.example" with versions (v1 and v2);
// lossy gives v1 a field v2's schema prunes.
func prepCRD(kind string, lossy bool, versions ...version) *apiextensionsv1.CustomResourceDefinition {
	plural := strings.ToLower(kind) + "s"
	crd := &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + prepGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: prepGroup, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"},
		},
	}
	for _, v := range versions {
		spec := map[string]apiextensionsv1.JSONSchemaProps{"color": {Type: "string"}, "size": {Type: "integer"}}
		if lossy && v.name == "v1" {
			spec["legacy"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		}
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v.name, Served: v.served, Storage: v.storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", Properties: spec}}}},
		})
	}
	return crd
}

// plantStale creates kind storing v1 with n objects, then switches storage
// to v2 and, unless lossy, stops serving v1 (as the release before the one
// that drops it would): storedVersions is [v1 v2], every object in v1. A
// lossy kind keeps v1 served, so that the round-trip proof can read it.
func plantStale(ctx context.Context, env *envtestutil.Env, kind string, lossy bool, n int) {
	GinkgoHelper()
	c := env.Client
	crd := prepCRD(kind, lossy, v1, v2Served)
	Expect(c.Create(ctx, crd)).To(Succeed())
	Expect(envtestutil.WaitServed(ctx, c, env.Dynamic, crd.Name)).To(Succeed())
	gvr := schema.GroupVersionResource{Group: prepGroup, Version: "v1", Resource: crd.Spec.Names.Plural}
	Expect(envtestutil.CreateObjects(ctx, env.Dynamic, gvr, n, 8, func(i int) *unstructured.Unstructured {
		spec := map[string]any{"color": fmt.Sprintf("c%d", i), "size": int64(i)}
		if lossy {
			spec["legacy"] = "only in v1"
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": prepGroup + "/v1", "kind": kind,
			"metadata": map[string]any{"name": fmt.Sprintf("o%d", i), "namespace": "default"}, "spec": spec}}
	})).To(Succeed())
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return err
		}
		crd.Spec.Versions[0].Storage, crd.Spec.Versions[1].Storage = false, true
		crd.Spec.Versions[0].Served = lossy
		return c.Update(ctx, crd)
	})).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(crd), crd)).To(Succeed())
		g.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1", "v2"}))
	}).Should(Succeed())
}

// plantReady creates kind already as the release wants it: v1 no longer
// served, v2 its storage version and the only stored one, with n objects.
func plantReady(ctx context.Context, env *envtestutil.Env, kind string, n int) {
	GinkgoHelper()
	crd := prepCRD(kind, false, v1Unserve, v2)
	Expect(env.Client.Create(ctx, crd)).To(Succeed())
	Expect(envtestutil.WaitServed(ctx, env.Client, env.Dynamic, crd.Name)).To(Succeed())
	gvr := schema.GroupVersionResource{Group: prepGroup, Version: "v2", Resource: crd.Spec.Names.Plural}
	Expect(envtestutil.CreateObjects(ctx, env.Dynamic, gvr, n, 8, func(i int) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": prepGroup + "/v2", "kind": kind,
			"metadata": map[string]any{"name": fmt.Sprintf("o%d", i), "namespace": "default"}, "spec": map[string]any{"color": "c"}}}
	})).To(Succeed())
}

// writeRelease writes the release's CRDs (v2 only: it drops v1) as one
// YAML stream.
func writeRelease(path string, kinds ...string) {
	GinkgoHelper()
	var docs []string
	for _, kind := range kinds {
		data, err := yaml.Marshal(prepCRD(kind, false, v2))
		Expect(err).NotTo(HaveOccurred())
		docs = append(docs, string(data))
	}
	Expect(os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o600)).To(Succeed())
}

// runPrepare runs the CLI against the rig's kubeconfig until it exits.
func runPrepare(kubeconfig string, args ...string) (int, string, string) {
	GinkgoHelper()
	session := startPrepare(kubeconfig, args...)
	Eventually(session).WithTimeout(10 * time.Minute).Should(gexec.Exit())
	return session.ExitCode(), string(session.Out.Contents()), string(session.Err.Contents())
}

func startPrepare(kubeconfig string, args ...string) *gexec.Session {
	GinkgoHelper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	return session
}

// realWrites are the writes user made on p that store something: neither
// dry runs nor access reviews (SelfSubjectAccessReviews are created, never
// stored); of resource only, unless empty.
func realWrites(p *plane, user, resource string) []envtestutil.Write {
	GinkgoHelper()
	writes, err := p.audit.WritesBy(user)
	Expect(err).NotTo(HaveOccurred())
	var out []envtestutil.Write
	for _, w := range writes {
		if !w.DryRun && w.Resource != "selfsubjectaccessreviews" && (resource == "" || w.Resource == resource) {
			out = append(out, w)
		}
	}
	return out
}

// storedAs counts the objects of plural etcd holds in each apiVersion.
func storedAs(ctx context.Context, p *plane, plural string) map[string]int {
	GinkgoHelper()
	counts, err := p.env.Etcd.Counts(ctx, prepGroup, plural)
	Expect(err).NotTo(HaveOccurred())
	return counts
}

var _ = Describe("graduator prepare across contexts", Ordered, func() {
	var (
		rig      []*plane // prepare-a: stale; prepare-b: ready; prepare-c: lossy
		config   string
		release  string
		n        = objectsPerCRD()
		contexts = "prepare-a,prepare-b,prepare-c,gone"
	)

	BeforeAll(func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		names := []string{"prepare-a", "prepare-b", "prepare-c"}
		rig = make([]*plane, len(names))
		errs := make([]error, len(names))
		var wg sync.WaitGroup
		for i, name := range names {
			rig[i] = &plane{name: name}
			wg.Go(func() { errs[i] = startPlane(rig[i], filepath.Join(dir, name)) })
		}
		wg.Wait()
		DeferCleanup(func() error {
			var stops []error
			for _, p := range rig {
				if p.env != nil {
					stops = append(stops, p.env.Stop())
				}
			}
			return errors.Join(stops...)
		})
		Expect(errors.Join(errs...)).NotTo(HaveOccurred())

		rules, group := prepareRules(), preparedGroup
		Expect(access.RuleFor(prepGroup)).To(ContainSubstring(`verbs: ["get", "list", "patch"]`), "the rule the docs give")

		kc := clientcmdapi.NewConfig()
		for _, p := range rig {
			bind(ctx, p, preparer, append(rules, group))
			Expect(addContext(kc, p.name, p.env, envtest.User{Name: preparer})).To(Succeed())
		}
		// gone: plane-c of the suite, stopped.
		main, err := clientcmd.LoadFromFile(kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		kc.Clusters["gone"], kc.AuthInfos["gone"] = main.Clusters["plane-c"], main.AuthInfos["plane-c"]
		kc.Contexts["gone"] = &clientcmdapi.Context{Cluster: "gone", AuthInfo: "gone"}
		kc.CurrentContext = "prepare-a"
		config = filepath.Join(dir, "kubeconfig")
		Expect(clientcmd.WriteToFile(*kc, config)).To(Succeed())

		By(fmt.Sprintf("planting %d objects per stale CRD", n))
		var plant sync.WaitGroup
		plant.Go(func() {
			defer GinkgoRecover()
			plantStale(ctx, rig[0].env, "Alpha", false, n)
			plantStale(ctx, rig[0].env, "Beta", false, n)
		})
		plant.Go(func() {
			defer GinkgoRecover()
			plantReady(ctx, rig[1].env, "Alpha", 50)
			plantReady(ctx, rig[1].env, "Beta", 50)
		})
		plant.Go(func() {
			defer GinkgoRecover()
			plantStale(ctx, rig[2].env, "Alpha", true, 50)
			plantReady(ctx, rig[2].env, "Beta", 50)
		})
		plant.Wait()
		release = filepath.Join(dir, "release.yaml")
		writeRelease(release, "Alpha", "Beta")
	})

	It("prints the plan with --dry-run and writes nothing", func() {
		code, out, errOut := runPrepare(config, "prepare", "--against", release, "--context", contexts, "--dry-run")
		GinkgoWriter.Printf("dry run:\n%s\n%s\n", out, errOut)
		Expect(code).To(Equal(2), "gone could not be read")
		Expect(out).To(ContainSubstring("prepare-a: Planned\n  alphas.prepare.example: Planned: migrate to v2 and prune, because status.storedVersions lists v1, which the release drops"))
		Expect(out).To(ContainSubstring("prepare-b: Ready (nothing to do)"))
		Expect(out).To(ContainSubstring("gone: Unreachable"))
		By("--exit-code: 3 while a cluster has work planned, 0 where there is nothing to do")
		code, out, errOut = runPrepare(config, "prepare", "--against", release, "--context", "prepare-a,prepare-b", "--dry-run", "--exit-code")
		Expect(code).To(Equal(3), "%s\n%s", out, errOut)
		code, out, errOut = runPrepare(config, "prepare", "--against", release, "--context", "prepare-b", "--dry-run", "--exit-code")
		Expect(code).To(BeZero(), "%s\n%s", out, errOut)
		for _, p := range rig {
			Expect(realWrites(p, preparer, "")).To(BeEmpty(), "the dry run wrote on %s", p.name)
		}
	})

	It("makes the stale cluster ready, leaves the ready one untouched, refuses the lossy one with the field lost, reports the unreachable one, and exits 1", func(ctx SpecContext) {
		start := time.Now()
		code, out, errOut := runPrepare(config, "prepare", "--against", release, "--context", contexts, "-o", "json")
		GinkgoWriter.Printf("prepare took %s (%d objects per stale CRD)\n%s\n", time.Since(start), n, out)
		Expect(code).To(Equal(1), errOut)
		var got map[string]prepared
		Expect(json.Unmarshal([]byte(out), &got)).To(Succeed(), out)
		Expect(got).To(HaveLen(4))

		a := got["prepare-a"]
		Expect(a.Outcome).To(Equal("Ready"), a.Why)
		Expect(a.CRDs).To(HaveLen(2))
		for _, crd := range a.CRDs {
			Expect(crd.Outcome).To(Equal("Ready"), crd.Refused)
			Expect(crd.Pruned).To(BeTrue())
			Expect(crd.StoredVersions).To(Equal([]string{"v2"}))
			Expect(crd.Rewritten).To(BeNumerically("==", n), crd.CRD)
			Expect(crd.StartedAt).NotTo(BeNil())
			Expect(storedAs(ctx, rig[0], strings.Split(crd.CRD, ".")[0])).To(Equal(map[string]int{prepGroup + "/v2": n}), "etcd of prepare-a")
		}

		b := got["prepare-b"]
		Expect(b.Outcome).To(Equal("Ready"))
		Expect(b.CRDs).To(BeEmpty())
		Expect(realWrites(rig[1], preparer, "")).To(BeEmpty(), "prepare wrote on the ready cluster")

		c := got["prepare-c"]
		Expect(c.Outcome).To(Equal("Refused"))
		Expect(c.CRDs).To(HaveLen(1))
		Expect(c.CRDs[0].CRD).To(Equal("alphas." + prepGroup))
		Expect(c.CRDs[0].Refused).To(ContainSubstring("/spec/legacy"))
		Expect(c.Why).To(ContainSubstring("/spec/legacy"))
		Expect(realWrites(rig[2], preparer, "")).To(BeEmpty(), "prepare wrote on the lossy cluster")
		Expect(storedAs(ctx, rig[2], "alphas")).To(Equal(map[string]int{prepGroup + "/v1": 50}), "etcd of prepare-c")
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(rig[2].env.Client.Get(ctx, client.ObjectKey{Name: "alphas." + prepGroup}, crd)).To(Succeed())
		Expect(crd.Status.StoredVersions).To(Equal([]string{"v1", "v2"}))
		Expect(crd.Annotations).NotTo(HaveKey(driver.StateAnnotation))

		Expect(got["gone"].Outcome).To(Equal("Unreachable"))
		Expect(got["gone"].Error.Reason).To(Equal("Unreachable"))

		By("the scan afterwards finds nothing the release trips on in prepare-a")
		code, out, _ = graduator("", []string{config}, "scan", "--context", "prepare-a", "--against", release, "-o", "json")
		var scannedA map[string]scanned
		Expect(json.Unmarshal([]byte(out), &scannedA)).To(Succeed(), out)
		Expect(scannedA["prepare-a"].Findings).To(BeEmpty())
		Expect(code).To(Equal(0))

		By("a second run writes nothing more and exits 0 on the ready clusters")
		before := len(realWrites(rig[0], preparer, ""))
		code, out, errOut = runPrepare(config, "prepare", "--against", release, "--context", "prepare-a,prepare-b")
		Expect(code).To(Equal(0), out+errOut)
		Expect(out).To(ContainSubstring("prepare-a: Ready (nothing to do)"))
		Expect(realWrites(rig[0], preparer, "")).To(HaveLen(before))
	})

	// interrupted stops a run of prepare on a fresh stale CRD at about half
	// its objects with sig, runs it again, and checks what was written.
	interrupted := func(ctx SpecContext, kind string, sig os.Signal) {
		p := rig[0]
		plantStale(ctx, p.env, kind, false, n)
		plural := strings.ToLower(kind) + "s"
		rel := filepath.Join(GinkgoT().TempDir(), "release.yaml")
		writeRelease(rel, kind)
		args := []string{"prepare", "--against", rel, "--context", "prepare-a", "--qps", strconv.Itoa(max(n/4, 20)),
			"--page-size", strconv.Itoa(max(n/15, 20))}
		session := startPrepare(config, args...)
		Eventually(func() int { return storedAs(ctx, p, plural)[prepGroup+"/v2"] }).WithTimeout(5 * time.Minute).
			WithPolling(50 * time.Millisecond).Should(BeNumerically(">=", n/2))
		session.Signal(sig)
		Eventually(session).WithTimeout(time.Minute).Should(gexec.Exit())
		Expect(session.ExitCode()).NotTo(Equal(0))
		half := storedAs(ctx, p, plural)[prepGroup+"/v2"]
		GinkgoWriter.Printf("%s at %d of %d objects\n", sig, half, n)
		Expect(half).To(BeNumerically("<", n), "the run was not interrupted before its end")
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(p.env.Client.Get(ctx, client.ObjectKey{Name: plural + "." + prepGroup}, crd)).To(Succeed())
		Expect(crd.Status.StoredVersions).To(Equal([]string{"v1", "v2"}), "pruned before a complete pass")
		Expect(crd.Annotations).To(HaveKey(driver.StateAnnotation), "no progress kept")

		code, out, errOut := runPrepare(config, args...)
		Expect(code).To(Equal(0), out+errOut)
		Expect(out).To(ContainSubstring(plural + "." + prepGroup + ": Ready"))
		writes := realWrites(p, preparer, plural)
		GinkgoWriter.Printf("%d writes of %s for %d objects\n", len(writes), plural, n)
		Expect(len(writes)).To(BeNumerically("<=", n*12/10), "rewrote what was rewritten")
		Expect(storedAs(ctx, p, plural)).To(Equal(map[string]int{prepGroup + "/v2": n}))
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(prepGroup + "/v2")
		list.SetKind(kind + "List")
		Expect(p.env.Client.List(ctx, list)).To(Succeed())
		Expect(list.Items).To(HaveLen(n))
		for _, obj := range list.Items {
			i, err := strconv.Atoi(strings.TrimPrefix(obj.GetName(), "o"))
			Expect(err).NotTo(HaveOccurred())
			Expect(obj.Object["spec"]).To(Equal(map[string]any{"color": fmt.Sprintf("c%d", i), "size": int64(i)}), obj.GetName())
		}
		Expect(p.env.Client.Get(ctx, client.ObjectKey{Name: plural + "." + prepGroup}, crd)).To(Succeed())
		Expect(crd.Status.StoredVersions).To(Equal([]string{"v2"}))
	}

	It("resumes after Ctrl-C at about half a CRD, writing at most 1.2x its objects in all, nothing lost", func(ctx SpecContext) {
		interrupted(ctx, "Gamma", os.Interrupt)
	})

	It("resumes after SIGKILL at about half a CRD, writing at most 1.2x its objects in all, nothing lost", func(ctx SpecContext) {
		interrupted(ctx, "Delta", syscall.SIGKILL)
	})

	// The parallel target needs a quiet machine: by hand only, sized by
	// parallelEnv, it prints the times and asserts nothing.
	It("prints how long three clusters take in parallel against the slowest alone", func(ctx SpecContext) {
		per, _ := strconv.Atoi(os.Getenv(parallelEnv))
		if per <= 0 {
			Skip(parallelEnv + " is not set: the parallel timing runs by hand, on a quiet machine")
		}
		if cores, _ := strconv.ParseFloat(os.Getenv(parallelCPUEnv), 64); cores > 0 {
			for _, p := range rig {
				capCPU(p, cores)
			}
			GinkgoWriter.Printf("each cluster's API server and etcd capped at %.2f cores\n", cores)
		}
		var plant sync.WaitGroup
		for _, p := range rig {
			plant.Go(func() {
				defer GinkgoRecover()
				plantStale(ctx, p.env, "Zeta", false, per)
				plantStale(ctx, p.env, "Eta", false, per)
			})
		}
		plant.Wait()
		dir := GinkgoT().TempDir()
		alone, together := filepath.Join(dir, "zeta.yaml"), filepath.Join(dir, "eta.yaml")
		writeRelease(alone, "Zeta")
		writeRelease(together, "Eta")
		var slowest time.Duration
		for _, p := range rig {
			busy := cpuBusy()
			took, own := timedPrepare(config, "prepare", "--against", alone, "--context", p.name)
			slowest = max(slowest, took)
			GinkgoWriter.Printf("%s alone: %s for %d objects, %.2f cores busy, %.2f of them prepare's own\n",
				p.name, took, per, (cpuBusy()-busy).Seconds()/took.Seconds(), own.Seconds()/took.Seconds())
		}
		busy := cpuBusy()
		took, own := timedPrepare(config, "prepare", "--against", together, "--context", "prepare-a,prepare-b,prepare-c", "--parallel", "3")
		GinkgoWriter.Printf("three clusters in parallel: %s, %.2f cores busy, %.2f of them prepare's own; the slowest alone: %s; ratio %.2f (target <= 1.3)\n",
			took, (cpuBusy()-busy).Seconds()/took.Seconds(), own.Seconds()/took.Seconds(), slowest, took.Seconds()/slowest.Seconds())
		AddReportEntry("prepare parallel ratio", fmt.Sprintf("%.2f", took.Seconds()/slowest.Seconds()))
	})

	It("refuses a cluster where a right is missing, naming the rule, and goes on with the others", func(ctx SpecContext) {
		p := rig[1]
		plantStale(ctx, p.env, "Epsilon", false, 20)
		rel := filepath.Join(GinkgoT().TempDir(), "release.yaml")
		writeRelease(rel, "Epsilon")
		role := &rbacv1.ClusterRole{}
		Expect(p.env.Client.Get(ctx, client.ObjectKey{Name: preparer}, role)).To(Succeed())
		role.Rules = role.Rules[:len(role.Rules)-1] // the release's group
		Expect(p.env.Client.Update(ctx, role)).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			Expect(p.env.Client.Get(ctx, client.ObjectKey{Name: preparer}, role)).To(Succeed())
			role.Rules = append(role.Rules, preparedGroup)
			Expect(p.env.Client.Update(ctx, role)).To(Succeed())
		})
		before := len(realWrites(p, preparer, ""))
		code, out, _ := runPrepare(config, "prepare", "--against", rel, "--context", "prepare-b,prepare-a")
		GinkgoWriter.Printf("%s\n", out)
		Expect(code).To(Equal(1))
		Expect(out).To(ContainSubstring("prepare-b: Refused"))
		Expect(out).To(ContainSubstring(access.RuleFor(prepGroup)))
		Expect(out).To(ContainSubstring("prepare-a: Ready"))
		Expect(realWrites(p, preparer, "")).To(HaveLen(before))
	})
})

// cpuBusy is the CPU time this machine's cores have spent busy since boot,
// all cores summed (/proc/stat: everything but idle and iowait), so that a
// timing can say whether it was bound by the cores. Zero where there is no
// /proc/stat.
func cpuBusy() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	var busy int64
	for i, f := range fields[1:] {
		ticks, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0
		}
		if i != 3 && i != 4 && i < 8 { // not idle, iowait, nor guest time (counted in user)
			busy += ticks
		}
	}
	return time.Duration(busy) * time.Second / 100 // USER_HZ
}

// timedPrepare runs prepare, which must succeed: how long it took and the
// CPU time its process used.
func timedPrepare(kubeconfig string, args ...string) (took, cpu time.Duration) {
	GinkgoHelper()
	start := time.Now()
	session := startPrepare(kubeconfig, args...)
	Eventually(session).WithTimeout(10 * time.Minute).Should(gexec.Exit())
	took = time.Since(start)
	Expect(session.ExitCode()).To(Equal(0), string(session.Out.Contents())+string(session.Err.Contents()))
	state := session.Command.ProcessState
	return took, state.UserTime() + state.SystemTime()
}

// capCPU moves p's API server and etcd into a cgroup (v1, cpu controller)
// whose quota is cores, and moves them back at the spec's end.
func capCPU(p *plane, cores float64) {
	GinkgoHelper()
	const root = "/sys/fs/cgroup/cpu"
	dir := filepath.Join(root, "graduator-fleet-"+p.name)
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed(), "a cgroup v1 cpu controller, as root")
	write := func(file, value string) {
		GinkgoHelper()
		Expect(os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644)).To(Succeed())
	}
	write("cpu.cfs_period_us", "100000")
	write("cpu.cfs_quota_us", strconv.Itoa(int(cores*100000)))
	plane := p.env.Environment.ControlPlane
	marks := []string{"--secure-port=" + plane.APIServer.Port, "--listen-client-urls=" + plane.Etcd.URL.String()}
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	Expect(err).NotTo(HaveOccurred())
	var moved []string
	for _, proc := range procs {
		cmdline, err := os.ReadFile(proc)
		if err != nil {
			continue // gone meanwhile
		}
		for _, mark := range marks {
			if strings.Contains(string(cmdline), mark+"\x00") {
				pid := filepath.Base(filepath.Dir(proc))
				write("cgroup.procs", pid)
				moved = append(moved, pid)
			}
		}
	}
	Expect(moved).To(HaveLen(2), "%s's API server and etcd", p.name)
	DeferCleanup(func() {
		for _, pid := range moved {
			_ = os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(pid), 0o644)
		}
		Expect(os.Remove(dir)).To(Succeed())
	})
}
