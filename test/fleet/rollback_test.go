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
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
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

	"github.com/graduator/graduator/test/envtestutil"
)

// plantGraduated creates kind as release N+1 left it: v2 the storage
// version and the only stored one, every object written as v2; v1 as old
// says (served, unserved), or not listed when old is nil.
func plantGraduated(ctx context.Context, env *envtestutil.Env, kind string, old *version, n int) {
	GinkgoHelper()
	versions := []version{v2}
	if old != nil {
		versions = []version{*old, v2}
	}
	crd := prepCRD(kind, false, versions...)
	Expect(env.Client.Create(ctx, crd)).To(Succeed())
	Expect(envtestutil.WaitServed(ctx, env.Client, env.Dynamic, crd.Name)).To(Succeed())
	gvr := schema.GroupVersionResource{Group: prepGroup, Version: "v2", Resource: crd.Spec.Names.Plural}
	Expect(envtestutil.CreateObjects(ctx, env.Dynamic, gvr, n, 8, func(i int) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": prepGroup + "/v2", "kind": kind,
			"metadata": map[string]any{"name": fmt.Sprintf("o%d", i), "namespace": "default"},
			"spec":     map[string]any{"color": fmt.Sprintf("c%d", i), "size": int64(i)}}}
	})).To(Succeed())
	Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd)).To(Succeed())
	Expect(crd.Status.StoredVersions).To(Equal([]string{"v2"}))
}

// preparerPlane starts a plane named name whose preparer holds what
// config/prepare grants and the objects' group, and writes in dir a
// kubeconfig whose current context is that plane as the preparer (more adds
// contexts to it).
func preparerPlane(ctx context.Context, dir, name string, more func(*clientcmdapi.Config)) (*plane, string) {
	GinkgoHelper()
	p := &plane{name: name}
	err := startPlane(p, filepath.Join(dir, p.name))
	DeferCleanup(func() error {
		if p.env != nil {
			return p.env.Stop()
		}
		return nil
	})
	Expect(err).NotTo(HaveOccurred())
	bind(ctx, p, preparer, append(prepareRules(), preparedGroup))
	kc := clientcmdapi.NewConfig()
	Expect(addContext(kc, p.name, p.env, envtest.User{Name: preparer})).To(Succeed())
	if more != nil {
		more(kc)
	}
	kc.CurrentContext = p.name
	config := filepath.Join(dir, "kubeconfig")
	Expect(clientcmd.WriteToFile(*kc, config)).To(Succeed())
	return p, config
}

// prepareRules are the rules of config/prepare/role.yaml, what the docs
// grant prepare besides the objects.
func prepareRules() []rbacv1.PolicyRule {
	GinkgoHelper()
	root, err := envtestutil.ModuleRoot()
	Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(filepath.Join(root, "config", "prepare", "role.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var role rbacv1.ClusterRole
	Expect(yaml.UnmarshalStrict(data, &role)).To(Succeed())
	return role.Rules
}

// preparedGroup is the rule that grants prepare the objects of prepGroup,
// as the chart's prepare.groups does.
var preparedGroup = rbacv1.PolicyRule{APIGroups: []string{prepGroup}, Resources: []string{"*"}, Verbs: []string{"get", "list", "patch"}}

// releaseN is release N's CRD of kind: v1 only, its storage version.
func releaseN(kind string) *apiextensionsv1.CustomResourceDefinition {
	return prepCRD(kind, false, v1)
}

var _ = Describe("graduator prepare rolling back to a release that knows only v1", Ordered, func() {
	var (
		p       *plane
		config  string
		release string
		n       = 100
		kinds   = []string{"Gamma", "Delta", "Eta"} // Gamma: v1 served; Delta: v1 unserved; Eta: v1 not listed
	)

	BeforeAll(func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		p, config = preparerPlane(ctx, dir, "rollback-a", func(kc *clientcmdapi.Config) {
			main, err := clientcmd.LoadFromFile(kubeconfig)
			Expect(err).NotTo(HaveOccurred())
			kc.Clusters["gone"], kc.AuthInfos["gone"] = main.Clusters["plane-c"], main.AuthInfos["plane-c"]
			kc.Contexts["gone"] = &clientcmdapi.Context{Cluster: "gone", AuthInfo: "gone"}
		})

		plantGraduated(ctx, p.env, "Gamma", &v1Served, n)
		plantGraduated(ctx, p.env, "Delta", &v1Unserve, n)
		plantGraduated(ctx, p.env, "Eta", nil, n)
		var docs []string
		for _, kind := range kinds {
			data, err := yaml.Marshal(releaseN(kind))
			Expect(err).NotTo(HaveOccurred())
			docs = append(docs, string(data))
		}
		release = filepath.Join(dir, "release-n.yaml")
		Expect(os.WriteFile(release, []byte(strings.Join(docs, "---\n")), 0o600)).To(Succeed())

		By("release N is refused as it stands")
		Expect(applyRelease(ctx, p, kinds)).To(MatchError(ContainSubstring("missing from spec.versions")))
	})

	It("names the rollback with --dry-run and writes nothing", func() {
		code, out, errOut := runPrepare(config, "prepare", "--against", release, "--context", p.name, "--dry-run")
		GinkgoWriter.Printf("dry run:\n%s\n%s\n", out, errOut)
		Expect(code).To(BeZero(), errOut)
		Expect(out).To(ContainSubstring("gammas.prepare.example: Planned: roll back from v2 to v1: prove v2 -> v1 -> v2"))
		Expect(out).To(ContainSubstring("deltas.prepare.example: Planned: roll back from v2 to v1: serve v1 (its schema from the cluster's CRD)"))
		Expect(out).To(ContainSubstring("etas.prepare.example: Planned: roll back from v2 to v1: add v1 as the release defines it, served"))
		Expect(out).To(ContainSubstring("rewrite every object as v1, prune storedVersions to [v1]"))
		Expect(realWrites(p, preparer, "")).To(BeEmpty(), "the dry run wrote")
	})

	It("has scan advise a command that, run as written, rolls back every CRD; the unreachable cluster is named and exits 2", func(ctx SpecContext) {
		code, out, errOut := runPrepare(config, "scan", "--against", release, "--context", p.name, "-o", "json")
		Expect(code).To(Equal(1), "error findings: %s", errOut)
		var scans map[string]scanned
		Expect(json.Unmarshal([]byte(out), &scans)).To(Succeed(), out)
		var fix string
		for _, f := range scans[p.name].Findings {
			if f.Rule == "release/stored-version-removed" {
				fix = f.Fix
			}
		}
		Expect(fix).To(HavePrefix("graduator prepare --against "+release+" --context "+p.name+" ("), "the advice names prepare")

		By("following the advice, with an unreachable cluster added")
		args := strings.Fields(strings.TrimPrefix(fix[:strings.Index(fix, " (")], "graduator "))
		args[len(args)-1] += ",gone"
		code, out, errOut = runPrepare(config, append(args, "-o", "json")...)
		GinkgoWriter.Printf("prepare %s:\n%s\n%s\n", strings.Join(args, " "), out, errOut)
		Expect(code).To(Equal(2), "gone could not be read: %s", errOut)
		var got map[string]prepared
		Expect(json.Unmarshal([]byte(out), &got)).To(Succeed(), out)
		Expect(got["gone"].Outcome).To(Equal("Unreachable"))
		a := got[p.name]
		Expect(a.Outcome).To(Equal("Ready"), a.Why)
		Expect(a.CRDs).To(HaveLen(len(kinds)))
		for _, crd := range a.CRDs {
			Expect(crd.Verdict).To(Equal("Rollback"), crd.CRD)
			Expect(crd.Outcome).To(Equal("Ready"), crd.Refused)
			Expect(crd.StoredVersions).To(Equal([]string{"v1"}), crd.CRD)
		}

		By("etcd holds every object as v1, and storedVersions is [v1]")
		for _, kind := range kinds {
			plural := strings.ToLower(kind) + "s"
			Expect(storedAs(ctx, p, plural)).To(Equal(map[string]int{prepGroup + "/v1": n}), plural)
			crd := &apiextensionsv1.CustomResourceDefinition{}
			Expect(p.env.Client.Get(ctx, client.ObjectKey{Name: plural + "." + prepGroup}, crd)).To(Succeed())
			Expect(crd.Status.StoredVersions).To(Equal([]string{"v1"}), plural)
		}

		By("release N's CRDs apply, and every object reads back with its values")
		Expect(applyRelease(ctx, p, kinds)).To(Succeed())
		for _, kind := range kinds {
			gvr := schema.GroupVersionResource{Group: prepGroup, Version: "v1", Resource: strings.ToLower(kind) + "s"}
			list, err := p.env.Dynamic.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(list.Items).To(HaveLen(n))
			for _, o := range list.Items {
				var i int64
				_, err := fmt.Sscanf(o.GetName(), "o%d", &i)
				Expect(err).NotTo(HaveOccurred())
				Expect(o.Object["spec"]).To(Equal(map[string]any{"color": fmt.Sprintf("c%d", i), "size": i}), o.GetName())
			}
		}
	})

	It("names a storage version set by hand without serving it at once, and prepare serves it", func(ctx SpecContext) {
		plantGraduated(ctx, p.env, "Zeta", &v1Unserve, n)
		By("storage switched to v1 by hand while v1 is not served: the API server accepts it")
		name := "zetas." + prepGroup
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := p.env.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return err
			}
			crd.Spec.Versions[0].Storage, crd.Spec.Versions[1].Storage = true, false
			return p.env.Client.Update(ctx, crd)
		})).To(Succeed())

		code, out, errOut := runPrepare(config, "migrate", name, "--context", p.name)
		GinkgoWriter.Printf("migrate:\n%s\n%s\n", out, errOut)
		Expect(code).NotTo(BeZero())
		Expect(errOut).To(ContainSubstring("v1 is the storage version of " + name + " but is not served"))
		Expect(errOut).To(ContainSubstring("serve v1"))
		Expect(errOut).NotTo(ContainSubstring("waited longer than"))

		data, err := yaml.Marshal(releaseN("Zeta"))
		Expect(err).NotTo(HaveOccurred())
		zeta := filepath.Join(GinkgoT().TempDir(), "release-n-zeta.yaml")
		Expect(os.WriteFile(zeta, data, 0o600)).To(Succeed())
		code, out, errOut = runPrepare(config, "prepare", "--against", zeta, "--context", p.name, "--dry-run")
		Expect(code).To(BeZero(), errOut)
		Expect(out).To(ContainSubstring(name + ": Planned: serve v1 (its schema from the cluster's CRD), migrate to v1 and prune"))
		code, out, errOut = runPrepare(config, "prepare", "--against", zeta, "--context", p.name)
		Expect(code).To(BeZero(), "%s\n%s", out, errOut)
		Expect(storedAs(ctx, p, "zetas")).To(Equal(map[string]int{prepGroup + "/v1": n}))
		Expect(applyRelease(ctx, p, []string{"Zeta"})).To(Succeed())
	})
})

// applyRelease updates each kind's CRD to release N's, as helm rollback
// would.
func applyRelease(ctx context.Context, p *plane, kinds []string) error {
	for _, kind := range kinds {
		want := releaseN(kind)
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			live := &apiextensionsv1.CustomResourceDefinition{}
			if err := p.env.Client.Get(ctx, client.ObjectKeyFromObject(want), live); err != nil {
				return err
			}
			live.Spec = want.Spec
			return p.env.Client.Update(ctx, live)
		})
		if err != nil {
			return fmt.Errorf("apply release N's %s: %w", want.Name, err)
		}
	}
	return nil
}
