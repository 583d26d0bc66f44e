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
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/graduationtest"
	"github.com/graduator/graduator/internal/access"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/test/chart"
)

// The chart's RBAC, installed as `helm install` would, and the built manager
// binary running as the chart's ServiceAccount (impersonated): what the
// ServiceAccount may do is exactly what the chart grants.
var _ = Describe("The Helm chart's RBAC, with the manager running as its ServiceAccount", Ordered, func() {
	const widgets = 30
	var (
		managerBinary string
		etcd          *graduationtest.EtcdStore
		admin         []byte // a kubeconfig of a system:masters user
	)

	BeforeAll(func() {
		if _, err := chart.Helm(); err != nil {
			Skip(err.Error())
		}
		managerBinary = filepath.Join(GinkgoT().TempDir(), "manager")
		build := exec.Command("go", "build", "-o", managerBinary, "github.com/graduator/graduator/cmd/manager")
		build.Stdout, build.Stderr = GinkgoWriter, GinkgoWriter
		Expect(build.Run()).To(Succeed())

		etcd = env.Etcd
		user, err := testEnv.AddUser(envtest.User{Name: "chart-installer", Groups: []string{"system:masters"}}, nil)
		Expect(err).NotTo(HaveOccurred())
		admin, err = user.KubeConfig()
		Expect(err).NotTo(HaveOccurred())
	})

	ready := func(ctx context.Context, name string) func() *metav1.Condition {
		return func() *metav1.Condition {
			var policy graduatorv1alpha1.CRDVersionPolicy
			if err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, &policy); err != nil {
				return nil
			}
			return meta.FindStatusCondition(policy.Status.Conditions, graduatorv1alpha1.ConditionReady)
		}
	}
	storedAs := func(ctx context.Context, group string) map[string]int {
		counts, err := etcd.Counts(ctx, group, "widgets")
		Expect(err).NotTo(HaveOccurred())
		return counts
	}
	crdNow := func(ctx context.Context, name string) *apiextensionsv1.CustomResourceDefinition {
		var crd apiextensionsv1.CustomResourceDefinition
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, &crd)).To(Succeed())
		return &crd
	}
	graduates := func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) {
		GinkgoHelper()
		Eventually(ready(ctx, crd.Name)).WithTimeout(90*time.Second).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", graduation.ReasonGraduated)), "policy %s", crd.Name)
		Expect(crdNow(ctx, crd.Name).Status.StoredVersions).To(Equal([]string{"v2"}), "storedVersions pruned")
		Expect(storedAs(ctx, crd.Spec.Group)).To(Equal(map[string]int{crd.Spec.Group + "/v2": widgets}),
			"etcd holds every object as v2")
	}

	DescribeTable("graduates the CRDs of the granted groups only",
		func(ctx SpecContext, entry int, allGroups bool) {
			release := fmt.Sprintf("rbac%d", entry)
			namespace := fmt.Sprintf("graduator-rbac-%d", entry)
			granted := fmt.Sprintf("granted%d.rbac.test.graduator.io", entry)
			other := fmt.Sprintf("other%d.rbac.test.graduator.io", entry)

			By("rendering the chart with helm template")
			values := []string{"replicas=2", "rbac.migrateGroups={" + granted + "}"}
			if allGroups {
				values = []string{"replicas=2", "rbac.allGroups=true"}
			}
			objs, err := chart.Template(release, namespace, values...)
			Expect(err).NotTo(HaveOccurred())
			deployment := chart.Find(objs, "Deployment", release+"-graduator")
			Expect(deployment).NotTo(BeNil())
			serviceAccount := deployment.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["serviceAccountName"].(string)

			By("installing its ServiceAccount and RBAC, and aggregating the ClusterRoles")
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
			Expect(k8sClient.Create(ctx, ns)).To(Succeed())
			var aggregated []string
			for _, obj := range objs {
				switch obj.GetKind() {
				case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
				default:
					continue
				}
				Expect(k8sClient.Create(ctx, obj)).To(Succeed(), "create %s %s", obj.GetKind(), obj.GetName())
				if obj.GetNamespace() != namespace { // cluster-wide, or in kube-system (the etcd space ledger's Role)
					DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, obj))).To(Succeed()) })
				}
				if _, ok := obj.Object["aggregationRule"]; ok {
					aggregated = append(aggregated, obj.GetName())
				}
			}
			Expect(aggregated).To(ConsistOf(release+"-graduator-migrate"), "the chart aggregates one migrate ClusterRole")
			for _, name := range aggregated {
				aggregateClusterRole(ctx, name)
			}

			user := "system:serviceaccount:" + namespace + ":" + serviceAccount
			// The API server's RBAC authorizer reads roles and bindings
			// through informers: a grant just created is seen a moment
			// later. Wait until the aggregated migrate rule is in force, so
			// that a denial below is the chart's and not the informer's lag.
			By("waiting until " + user + " may patch widgets of the granted group")
			Eventually(func(ctx context.Context) bool {
				return may(ctx, user, namespace, authorizationv1.ResourceAttributes{Verb: "patch", Group: granted, Resource: "widgets", Namespace: "default"})
			}).WithContext(ctx).WithTimeout(30*time.Second).Should(BeTrue(), "the chart's migrate rule reaches the authorizer")

			By("a SubjectAccessReview: may " + user + " get Secrets?")
			secretsAllowed := may(ctx, user, namespace, authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: namespace})
			if allGroups {
				// As values.yaml says: RBAC has no deny, so every group includes core.
				Expect(secretsAllowed).To(BeTrue(), "rbac.allGroups grants every group, Secrets included")
			} else {
				Expect(secretsAllowed).To(BeFalse(), "the chart grants nothing on core Secrets")
				Expect(may(ctx, user, namespace, authorizationv1.ResourceAttributes{Verb: "list", Resource: "secrets"})).To(BeFalse())
			}

			grantedCRD := widgetsToGraduate(ctx, granted, widgets)
			otherCRD := widgetsToGraduate(ctx, other, widgets)
			before := crdNow(ctx, otherCRD.Name)

			By("running the built manager binary as the ServiceAccount, with the Deployment's arguments")
			stop, _ := startManagerAs(managerBinary, impersonating(admin, user), containerArgs(deployment))
			DeferCleanup(stop)

			graduates(ctx, grantedCRD)
			if allGroups {
				graduates(ctx, otherCRD)
				return
			}

			By("the CRD of a group not granted: Forbidden, naming the rule, and nothing switched or written")
			Eventually(ready(ctx, otherCRD.Name)).WithTimeout(60 * time.Second).Should(And(
				HaveField("Status", metav1.ConditionFalse),
				HaveField("Reason", graduation.ReasonForbidden),
				HaveField("Message", ContainSubstring("not allowed to list, get, patch widgets."+other)),
				HaveField("Message", ContainSubstring(access.RuleFor(other))),
				HaveField("Message", ContainSubstring("--set rbac.migrateGroups={"+other+"}"))))
			after := crdNow(ctx, otherCRD.Name)
			Expect(equality.Semantic.DeepEqual(before.Spec.Versions, after.Spec.Versions)).To(BeTrue(),
				"spec.versions unchanged: v1 still the storage version")
			Expect(after.Generation).To(Equal(before.Generation))
			Expect(after.Status.StoredVersions).To(Equal([]string{"v1"}), "storedVersions untouched")
			Expect(storedAs(ctx, other)).To(Equal(map[string]int{other + "/v1": widgets}), "etcd: no object rewritten")
		},
		Entry("rbac.migrateGroups={granted group}: the other group's policy reports Forbidden", 1, false),
		Entry("rbac.allGroups=true: both graduate", 2, true),
	)
})

// aggregateClusterRole does what kube-controller-manager's clusterrole-
// aggregation controller does in a real cluster: it sets the rules of the
// ClusterRole named name to the rules of every ClusterRole its
// aggregationRule selects. envtest runs kube-apiserver and etcd only, no
// controller-manager, so the test performs that step itself.
func aggregateClusterRole(ctx context.Context, name string) {
	GinkgoHelper()
	var role rbacv1.ClusterRole
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, &role)).To(Succeed())
	var rules []rbacv1.PolicyRule
	for _, selector := range role.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&selector)
		Expect(err).NotTo(HaveOccurred())
		var list rbacv1.ClusterRoleList
		Expect(k8sClient.List(ctx, &list, client.MatchingLabelsSelector{Selector: sel})).To(Succeed())
		sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
		for _, source := range list.Items {
			if source.Name == name {
				continue
			}
			for _, r := range source.Rules {
				if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(have, r) }) {
					rules = append(rules, r)
				}
			}
		}
	}
	Expect(rules).NotTo(BeEmpty(), "no ClusterRole is labelled for %s", name)
	role.Rules = rules
	Expect(k8sClient.Update(ctx, &role)).To(Succeed())
}

// may asks the API server (SubjectAccessReview) whether the user, with the
// groups the API server gives a ServiceAccount, may do attrs.
func may(ctx context.Context, user, namespace string, attrs authorizationv1.ResourceAttributes) bool {
	GinkgoHelper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               user,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
		ResourceAttributes: &attrs,
	}}
	Expect(k8sClient.Create(ctx, review)).To(Succeed())
	return review.Status.Allowed
}

// impersonating writes a kubeconfig that authenticates as the admin
// kubeconfig does and acts as user (the `as:` of a kubeconfig user).
func impersonating(admin []byte, user string) string {
	GinkgoHelper()
	config, err := clientcmd.Load(admin)
	Expect(err).NotTo(HaveOccurred())
	for _, auth := range config.AuthInfos {
		auth.Impersonate = user
	}
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(clientcmd.WriteToFile(*config, path)).To(Succeed())
	return path
}

// containerArgs returns the rendered Deployment's manager arguments, less
// the bind addresses (the test picks free ports).
func containerArgs(deployment *unstructured.Unstructured) []string {
	GinkgoHelper()
	containers, _, err := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	Expect(err).NotTo(HaveOccurred())
	var args []string
	for _, a := range containers[0].(map[string]any)["args"].([]any) {
		arg := a.(string)
		if strings.HasPrefix(arg, "--metrics-bind-address") || strings.HasPrefix(arg, "--health-probe-bind-address") {
			continue
		}
		args = append(args, arg)
	}
	return args
}

// startManagerAs runs the manager binary with the kubeconfig and args and
// returns what stops it (SIGTERM, then SIGKILL after 20 s) and the address of
// its metrics endpoint.
func startManagerAs(binary, kubeconfig string, args []string) (stop func(), metricsAddr string) {
	GinkgoHelper()
	metricsAddr = freeLocalAddr()
	args = append(args, "--kubeconfig", kubeconfig,
		"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", freeLocalAddr())
	session, err := gexec.Start(exec.Command(binary, args...), GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	return func() {
		session.Signal(syscall.SIGTERM)
		if !waitExit(session, 20*time.Second) {
			session.Kill()
			waitExit(session, 5*time.Second)
		}
	}, metricsAddr
}

func waitExit(session *gexec.Session, timeout time.Duration) bool {
	select {
	case <-session.Exited:
		return true
	case <-time.After(timeout):
		return false
	}
}
