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
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/graduator/graduator/internal/access"
	"github.com/graduator/graduator/test/envtestutil"
)

var _ = Describe("The graduator CLI", Ordered, func() {
	var (
		binary     string
		kubeconfig string
	)

	BeforeAll(func() {
		binary, kubeconfig = buildCLI()
	})

	run := func(args ...string) *gexec.Session {
		session, err := gexec.Start(exec.Command(binary, append(args, "--kubeconfig", kubeconfig)...), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(session).WithTimeout(2 * time.Minute).Should(gexec.Exit())
		return session
	}

	type statusRow struct {
		Name           string   `json:"name"`
		StorageVersion string   `json:"storageVersion"`
		StoredVersions []string `json:"storedVersions"`
		Drift          []string `json:"drift"`
	}
	statusOf := func(name string) statusRow {
		session := run("status", "-o", "json")
		Expect(session.ExitCode()).To(BeZero())
		var rows []statusRow
		Expect(json.Unmarshal(session.Out.Contents(), &rows)).To(Succeed())
		for _, r := range rows {
			if r.Name == name {
				return r
			}
		}
		Fail("graduator status does not list " + name)
		return statusRow{}
	}

	It("migrates a CRD, prunes storedVersions, and status shows the drift gone", func(ctx SpecContext) {
		const n = 120
		f := newFixture(ctx, n)
		f.switchStorage(ctx)
		Expect(statusOf(f.crd.Name)).To(And(
			HaveField("StorageVersion", "v2"), HaveField("Drift", ConsistOf("v1"))))

		session := run("migrate", f.crd.Name, "--prune", "--page-size", "50", "-o", "json")
		Expect(session.ExitCode()).To(BeZero(), string(session.Err.Contents()))
		var summary struct {
			Listed, Rewritten, Failed int64
			Complete, Pruned          bool
			StoredVersions            []string
			Sweep, SweepReason        string
		}
		Expect(json.Unmarshal(session.Out.Contents(), &summary)).To(Succeed())
		Expect(summary.Complete).To(BeTrue())
		Expect(summary.Sweep).To(Equal("watch"), "the catch-up sweep went by its watch: %s", summary.SweepReason)
		Expect(summary.Listed).To(BeEquivalentTo(n))
		Expect(summary.Rewritten).To(BeEquivalentTo(n))
		Expect(summary.Pruned).To(BeTrue())
		Expect(summary.StoredVersions).To(Equal([]string{"v2"}))

		Expect(f.storedCounts(ctx)).To(Equal(map[string]int{f.group + "/v2": n}), "etcd holds every object as v2")
		var crd apiextensionsv1.CustomResourceDefinition
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(f.crd), &crd)).To(Succeed())
		Expect(crd.Status.StoredVersions).To(Equal([]string{"v2"}))
		Expect(statusOf(f.crd.Name).Drift).To(BeEmpty())
	})

	It("exits non-zero, names the rejected objects and does not prune when an object is rejected", func(ctx SpecContext) {
		f := newFixture(ctx, 30)
		ns, name := key(3)
		_, err := dyn.Resource(f.v1).Namespace(ns).Patch(ctx, name, "application/merge-patch+json",
			[]byte(`{"metadata":{"labels":{"frozen":"true"}}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		denyUpdatesOfFrozen(ctx, f, 3)
		f.switchStorage(ctx)

		session := run("migrate", f.crd.Name, "--prune")
		Expect(session.ExitCode()).To(Equal(2))
		Expect(session.Out.Contents()).To(ContainSubstring("failed: " + ns + "/" + name))
		Expect(session.Out.Contents()).To(ContainSubstring("status.storedVersions: [v1, v2]"))
		Expect(session.Err.Contents()).To(ContainSubstring("1 objects of " + f.crd.Name + " could not be rewritten"))
		var crd apiextensionsv1.CustomResourceDefinition
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(f.crd), &crd)).To(Succeed())
		Expect(crd.Status.StoredVersions).To(ConsistOf("v1", "v2"))
	})

	It("refuses to migrate without the rights on the CRD's group, exits 1 naming the rule to add, and writes nothing", func(ctx SpecContext) {
		f := newFixture(ctx, 20)
		f.switchStorage(ctx)
		denied := kubeconfigWithoutGroupRights(ctx, "cli-without-group-rights")

		session, err := gexec.Start(exec.Command(binary, "migrate", f.crd.Name, "--prune", "--kubeconfig", denied), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(session).WithTimeout(time.Minute).Should(gexec.Exit(1))
		Expect(string(session.Err.Contents())).To(And(
			ContainSubstring("not allowed to list, get, patch widgets."+f.group),
			ContainSubstring(access.RuleFor(f.group)),
			ContainSubstring("--set rbac.migrateGroups={"+f.group+"}")))
		Expect(f.storedCounts(ctx)).To(HaveKeyWithValue(f.group+"/v1", 20), "no object was rewritten")
		var crd apiextensionsv1.CustomResourceDefinition
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(f.crd), &crd)).To(Succeed())
		Expect(crd.Status.StoredVersions).To(ConsistOf("v1", "v2"))
	})

	It("on a CRD whose storedVersions lists only the storage version says nothing to migrate and writes nothing; --force rewrites every object", func(ctx SpecContext) {
		const n = 40
		f := newFixture(ctx, n)
		f.switchStorage(ctx)
		By("storedVersions pruned by hand while etcd still holds every object as v1")
		var crd apiextensionsv1.CustomResourceDefinition
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(f.crd), &crd)).To(Succeed())
		crd.Status.StoredVersions = []string{"v2"}
		Expect(k8sClient.Status().Update(ctx, &crd)).To(Succeed())
		Expect(f.storedCounts(ctx)).To(HaveKeyWithValue(f.group+"/v1", n))
		before := f.resourceVersions(ctx)

		session := run("migrate", f.crd.Name, "--prune")
		Expect(session.ExitCode()).To(BeZero(), string(session.Err.Contents()))
		Expect(string(session.Out.Contents())).To(ContainSubstring(
			f.crd.Name + ": nothing to migrate: every object is stored as v2 (status.storedVersions is [v2]); --force rewrites every object anyway"))
		Expect(f.resourceVersions(ctx)).To(Equal(before), "no object was written")

		session = run("migrate", f.crd.Name, "--force", "-o", "json")
		Expect(session.ExitCode()).To(BeZero(), string(session.Err.Contents()))
		var summary struct {
			Listed, Rewritten int64
			Complete          bool
			NothingToMigrate  bool
		}
		Expect(json.Unmarshal(session.Out.Contents(), &summary)).To(Succeed())
		Expect(summary.Complete).To(BeTrue())
		Expect(summary.NothingToMigrate).To(BeFalse())
		Expect(summary.Listed).To(BeEquivalentTo(n))
		Expect(summary.Rewritten).To(BeEquivalentTo(n))
		Expect(f.storedCounts(ctx)).To(Equal(map[string]int{f.group + "/v2": n}), "etcd holds every object as v2")
	})

	It("on a CRD with nothing stale still refuses a user without the rights, exits 1 naming the rule to add", func(ctx SpecContext) {
		f := newFixture(ctx, 10)
		denied := kubeconfigWithoutGroupRights(ctx, "cli-clean-without-group-rights")
		for _, args := range [][]string{{"migrate", f.crd.Name}, {"migrate", f.crd.Name, "--force"}} {
			session, err := gexec.Start(exec.Command(binary, append(args, "--kubeconfig", denied)...), GinkgoWriter, GinkgoWriter)
			Expect(err).NotTo(HaveOccurred())
			Eventually(session).WithTimeout(time.Minute).Should(gexec.Exit(1), "%v", args)
			Expect(string(session.Err.Contents())).To(And(
				ContainSubstring("not allowed to list, get, patch widgets."+f.group),
				ContainSubstring(access.RuleFor(f.group))), "%v", args)
		}
	})

	It("--write-to Status rewrites objects whose every update admission denies, and prunes", func(ctx SpecContext) {
		const n = 30
		f := newFixture(ctx, n)
		for i := range n {
			ns, name := key(i)
			_, err := dyn.Resource(f.v1).Namespace(ns).Patch(ctx, name, types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"frozen":"true"}}}`), metav1.PatchOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		// Updates of the objects are denied, updates of their /status are not.
		denyUpdatesOfFrozen(ctx, f, 0)
		f.switchStorage(ctx)

		session := run("migrate", f.crd.Name, "--write-to", "Status", "--prune")
		Expect(session.ExitCode()).To(BeZero(), string(session.Err.Contents()))
		Expect(f.storedCounts(ctx)).To(Equal(map[string]int{f.group + "/v2": n}), "etcd holds every object as v2")
		var crd apiextensionsv1.CustomResourceDefinition
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(f.crd), &crd)).To(Succeed())
		Expect(crd.Status.StoredVersions).To(Equal([]string{"v2"}))
	})

	It("--write-to Status on a version without a status subresource exits 1, says why, and writes nothing", func(ctx SpecContext) {
		f := newFixture(ctx, 20)
		var crd apiextensionsv1.CustomResourceDefinition
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(f.crd), &crd)).To(Succeed())
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Subresources = nil
		}
		Expect(k8sClient.Update(ctx, &crd)).To(Succeed())
		f.switchStorage(ctx)

		session := run("migrate", f.crd.Name, "--write-to", "Status", "--prune")
		Expect(session.ExitCode()).To(Equal(1))
		Expect(string(session.Err.Contents())).To(ContainSubstring("version v2 of " + f.crd.Name + " has no status subresource"))
		Expect(f.storedCounts(ctx)).To(Equal(map[string]int{f.group + "/v1": 20}), "no object was rewritten")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(f.crd), &crd)).To(Succeed())
		Expect(crd.Status.StoredVersions).To(ConsistOf("v1", "v2"))

		Expect(run("migrate", f.crd.Name, "--write-to", "status").ExitCode()).To(Equal(1), "an unknown target is refused")
	})

	It("explains a CRD that does not exist, without client-go's log lines", func() {
		session := run("migrate", "nothing.example.graduator.io")
		Expect(session.ExitCode()).To(Equal(1))
		Expect(session.Err.Contents()).To(ContainSubstring(`customresourcedefinitions.apiextensions.k8s.io "nothing.example.graduator.io" not found`))
		Expect(string(session.Err.Contents())).NotTo(MatchRegexp(`(?m)^[IWEF]\d{4} `), "no klog line")
	})

	It("exits 1 on a usage error in migrate and status, 2 in verify and check, whose 1 means differences and unsafe", func() {
		for _, tc := range []struct {
			args []string
			code int
		}{
			{[]string{"migrate", "widgets.example.com", "--colour"}, 1},
			{[]string{"migrate"}, 1},
			{[]string{"status", "--colour"}, 1},
			{[]string{"status", "-o", "csv"}, 1},
			{[]string{"verify", "widgets.example.com", "--colour"}, 2},
			{[]string{"check", "a.yaml", "b.yaml", "--colour"}, 2},
			{[]string{"check", "a.yaml"}, 2},
		} {
			session := run(tc.args...)
			Expect(session.ExitCode()).To(Equal(tc.code), "graduator %v: %s", tc.args, session.Err.Contents())
		}
	})

	It("shows client-go's log lines with -v", func() {
		session := run("status", "-v", "6")
		Expect(session.ExitCode()).To(BeZero())
		Expect(string(session.Err.Contents())).To(MatchRegexp(`(?m)^I\d{4} `), "klog lines at -v 6")
	})
	Describe("check", func() {
		// manifest writes CRDs to a file as a release would ship them.
		manifest := func(name string, crds ...*apiextensionsv1.CustomResourceDefinition) string {
			var docs []string
			for _, crd := range crds {
				c := crd.DeepCopy()
				c.TypeMeta = metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}
				c.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
				data, err := yaml.Marshal(c)
				Expect(err).NotTo(HaveOccurred())
				docs = append(docs, string(data))
			}
			path := filepath.Join(GinkgoT().TempDir(), name)
			Expect(os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o600)).To(Succeed())
			return path
		}

		It("exits 0 on an identical pair, 1 on an unsafe one with the finding in text and JSON, and 2 on bad input", func() {
			old := envtestutil.WidgetCRD("check.test.graduator.io", "v1", "v2")
			changed := old.DeepCopy()
			for i := range changed.Spec.Versions {
				schema := changed.Spec.Versions[i].Schema.OpenAPIV3Schema
				specProps := schema.Properties["spec"]
				specProps.Properties["size"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
				schema.Properties["spec"] = specProps
			}
			oldFile, newFile := manifest("old.yaml", old), manifest("new.yaml", changed)

			Expect(run("check", oldFile, oldFile).ExitCode()).To(BeZero())

			text := run("check", oldFile, newFile)
			Expect(text.ExitCode()).To(Equal(1))
			Expect(string(text.Out.Contents())).To(And(ContainSubstring("type-changed"), ContainSubstring("^.spec.size"), ContainSubstring("UNSAFE")))
			asJSON := run("check", oldFile, newFile, "-o", "json")
			Expect(asJSON.ExitCode()).To(Equal(1))
			var report struct {
				Safe     bool
				Findings []struct{ Rule, Enforcement, CRD, Version, Path string }
			}
			Expect(json.Unmarshal(asJSON.Out.Contents(), &report)).To(Succeed())
			Expect(report.Safe).To(BeFalse())
			Expect(report.Findings).To(ContainElement(And(HaveField("Rule", "type-changed"), HaveField("Path", "^.spec.size"),
				HaveField("Enforcement", "error"), HaveField("CRD", old.Name))))

			notYAML := filepath.Join(GinkgoT().TempDir(), "broken.yaml")
			Expect(os.WriteFile(notYAML, []byte("a: [b\n"), 0o600)).To(Succeed())
			bad := run("check", oldFile, notYAML)
			Expect(bad.ExitCode()).To(Equal(2))
			Expect(string(bad.Err.Contents())).To(ContainSubstring("is not YAML or JSON"))
			configMap := filepath.Join(GinkgoT().TempDir(), "configmap.yaml")
			Expect(os.WriteFile(configMap, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"), 0o600)).To(Succeed())
			bad = run("check", oldFile, configMap)
			Expect(bad.ExitCode()).To(Equal(2), "a NEW without any CRD is the wrong file, not every CRD removed")
			Expect(string(bad.Err.Contents())).To(ContainSubstring("NEW " + configMap + " holds no CustomResourceDefinition"))
			Expect(run("check", oldFile, configMap, "--allow-empty").ExitCode()).To(Equal(1), "removing every CRD on purpose is unsafe")
			noVersions := old.DeepCopy()
			noVersions.Spec.Versions = nil
			bad = run("check", oldFile, manifest("noversions.yaml", noVersions))
			Expect(bad.ExitCode()).To(Equal(2))
			Expect(string(bad.Err.Contents())).To(ContainSubstring("spec.versions is missing"))
		})

		It("against the cluster flags a version that is still stored, and passes once migrate --prune ran", func(ctx SpecContext) {
			f := newFixture(ctx, 30)
			f.switchStorage(ctx)
			var live apiextensionsv1.CustomResourceDefinition
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(f.crd), &live)).To(Succeed())
			// v1 is no longer served, as after a graduation's retirement,
			// but objects are still stored in it.
			live.Spec.Versions[0].Served = false
			Expect(k8sClient.Update(ctx, &live)).To(Succeed())
			Expect(live.Status.StoredVersions).To(ContainElement("v1"))
			next := live.DeepCopy()
			next.Spec.Versions = next.Spec.Versions[1:] // the release drops v1
			newFile := manifest("next.yaml", next)

			flagged := run("check", "cluster", newFile, "-o", "json")
			Expect(flagged.ExitCode()).To(Equal(1), string(flagged.Err.Contents()))
			Expect(string(flagged.Out.Contents())).To(And(ContainSubstring(`"rule": "stored-version-removed"`), ContainSubstring(`"version": "v1"`)))

			Expect(run("migrate", f.crd.Name, "--prune").ExitCode()).To(BeZero())
			passed := run("check", "cluster", newFile)
			Expect(passed.ExitCode()).To(BeZero(), string(passed.Out.Contents()))
		})
	})
})

var cli struct{ binary, kubeconfig string }

// buildCLI builds the graduator binary once for the suite (AfterSuite
// removes it) and writes a kubeconfig for it.
// kubeconfigWithoutGroupRights writes the kubeconfig of a user who may read
// CRDs but nothing of any widgets' group.
func kubeconfigWithoutGroupRights(ctx context.Context, userName string) string {
	By("a user who may read CRDs but nothing of the widgets' group")
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: userName},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apiextensions.k8s.io"},
			Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get"}}},
	}
	Expect(k8sClient.Create(ctx, role)).To(Succeed())
	DeferCleanup(k8sClient.Delete, role)
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: userName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: userName}},
	}
	Expect(k8sClient.Create(ctx, binding)).To(Succeed())
	DeferCleanup(k8sClient.Delete, binding)
	user, err := testEnv.AddUser(envtest.User{Name: userName}, nil)
	Expect(err).NotTo(HaveOccurred())
	data, err := user.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	denied := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(os.WriteFile(denied, data, 0o600)).To(Succeed())

	return denied
}

func buildCLI() (binary, kubeconfig string) {
	if cli.binary == "" {
		var err error
		cli.binary, err = gexec.Build("github.com/graduator/graduator/cmd/graduator")
		Expect(err).NotTo(HaveOccurred())
		user, err := testEnv.AddUser(envtest.User{Name: "cli", Groups: []string{"system:masters"}}, nil)
		Expect(err).NotTo(HaveOccurred())
		data, err := user.KubeConfig()
		Expect(err).NotTo(HaveOccurred())
		dir, err := os.MkdirTemp("", "graduator-cli-")
		Expect(err).NotTo(HaveOccurred())
		cli.kubeconfig = filepath.Join(dir, "kubeconfig")
		Expect(os.WriteFile(cli.kubeconfig, data, 0o600)).To(Succeed())
	}
	return cli.binary, cli.kubeconfig
}
