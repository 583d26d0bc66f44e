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
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/test/chart"
)

// The chart's FlowSchema and PriorityLevelConfiguration, installed as `helm
// install` would, and the built manager binary running as the chart's
// ServiceAccount. The manager talks to the API server through a recording
// proxy that authenticates as envtest's admin and impersonates the
// ServiceAccount (what the rbac spec's kubeconfig `as:` does), so that every
// response the manager receives, the migration's patches included, is seen
// with its API Priority and Fairness headers. The API server classifies a
// request after impersonation, by the impersonated user: an admin request is
// exempt, so the FlowSchema's UID on a response proves the request was
// classified as the ServiceAccount's.
var _ = Describe("API Priority and Fairness: the chart's FlowSchema classifies the manager's requests", Ordered, func() {
	const (
		release   = "apf"
		namespace = "graduator-apf"
		group     = "apf.test.graduator.io"
		widgets   = 40
	)
	var managerBinary string

	BeforeAll(func() {
		if _, err := chart.Helm(); err != nil {
			Skip(err.Error())
		}
		managerBinary = filepath.Join(GinkgoT().TempDir(), "manager")
		build := exec.Command("go", "build", "-o", managerBinary, "github.com/graduator/graduator/cmd/manager")
		build.Stdout, build.Stderr = GinkgoWriter, GinkgoWriter
		Expect(build.Run()).To(Succeed())
	})

	It("defaults spec.migration.priority to Background and refuses other values", func(ctx SpecContext) {
		policy := &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "widgets.priority.test.graduator.io"},
			Spec:       graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v2"},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, policy))).To(Succeed()) })
		Expect(policy.Spec.Migration.Priority).To(Equal(graduatorv1alpha1.PriorityBackground), "defaulted by the API server")

		full := policy.DeepCopy()
		full.Spec.Migration.Priority = graduatorv1alpha1.PriorityFull
		Expect(k8sClient.Update(ctx, full)).To(Succeed())

		turbo := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": graduatorv1alpha1.GroupVersion.String(), "kind": "CRDVersionPolicy",
			"metadata": map[string]any{"name": "widgets.turbo.test.graduator.io"},
			"spec":     map[string]any{"storageVersion": "v2", "migration": map[string]any{"priority": "Turbo"}},
		}}
		err := k8sClient.Create(ctx, turbo)
		Expect(err).To(MatchError(And(ContainSubstring("spec.migration.priority"), ContainSubstring("Unsupported value"))))
	})

	It("puts every request of the manager running as the ServiceAccount in the chart's priority level", func(ctx SpecContext) {
		By("rendering the chart and installing its ServiceAccount, RBAC, FlowSchema and PriorityLevelConfiguration")
		objs, err := chart.Template(release, namespace, "rbac.migrateGroups={"+group+"}")
		Expect(err).NotTo(HaveOccurred())
		deployment := chart.Find(objs, "Deployment", release+"-graduator")
		Expect(deployment).NotTo(BeNil())
		serviceAccount, _, _ := unstructured.NestedString(deployment.Object, "spec", "template", "spec", "serviceAccountName")
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
		var flowSchema, priorityLevel *unstructured.Unstructured
		for _, obj := range objs {
			switch obj.GetKind() {
			case "FlowSchema":
				flowSchema = obj
			case "PriorityLevelConfiguration":
				priorityLevel = obj
			case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			default:
				continue
			}
			Expect(k8sClient.Create(ctx, obj)).To(Succeed(), "create %s %s", obj.GetKind(), obj.GetName())
			if obj.GetNamespace() == "" {
				DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, obj))).To(Succeed()) })
			}
		}
		Expect(flowSchema).NotTo(BeNil(), "the chart renders a FlowSchema by default")
		Expect(priorityLevel).NotTo(BeNil(), "the chart renders a PriorityLevelConfiguration by default")
		aggregateClusterRole(ctx, release+"-graduator-migrate")
		user := "system:serviceaccount:" + namespace + ":" + serviceAccount

		By("waiting for the API server's flow control to take the FlowSchema in (Dangling=False)")
		var fs flowcontrolv1.FlowSchema
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: flowSchema.GetName()}, &fs)).To(Succeed())
			dangling := fs.Status.Conditions
			g.Expect(dangling).To(ContainElement(And(
				HaveField("Type", flowcontrolv1.FlowSchemaConditionType(flowcontrolv1.FlowSchemaConditionDangling)),
				HaveField("Status", flowcontrolv1.ConditionFalse))))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		var plc flowcontrolv1.PriorityLevelConfiguration
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: priorityLevel.GetName()}, &plc)).To(Succeed())

		By("a proxy that acts as " + user + " and records the flow control headers of every response")
		proxy := newRecordingProxy(user)
		DeferCleanup(proxy.Close)
		Eventually(func(g Gomega) {
			// The same identity, one request of the test's own: classified
			// by the FlowSchema as soon as the API server's config has it.
			resp, err := http.Get(proxy.URL + "/api")
			g.Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
			g.Expect(resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID)).To(Equal(string(fs.UID)))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		proxy.reset()

		By("a widget CRD of the granted group with objects at v1, and a policy asking for v2")
		crd := widgetsToGraduate(ctx, group, widgets)
		policy := &graduatorv1alpha1.CRDVersionPolicy{ObjectMeta: metav1.ObjectMeta{Name: crd.Name}}

		By("running the built manager binary through the proxy, with the Deployment's arguments")
		stop, _ := startManagerAs(managerBinary, proxy.kubeconfig(), containerArgs(deployment))
		DeferCleanup(stop)
		Eventually(func() *metav1.Condition {
			var p graduatorv1alpha1.CRDVersionPolicy
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(policy), &p); err != nil {
				return nil
			}
			return meta.FindStatusCondition(p.Status.Conditions, graduatorv1alpha1.ConditionReady)
		}).WithTimeout(90 * time.Second).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", graduation.ReasonGraduated)))
		stop()

		By("every response the manager received carries the chart's FlowSchema and priority level")
		seen := proxy.responses()
		patches := 0
		for _, r := range seen {
			Expect(r.flowSchema).To(Equal(string(fs.UID)), "%s %s: classified by FlowSchema %q", r.method, r.path, r.flowSchema)
			Expect(r.priorityLevel).To(Equal(string(plc.UID)), "%s %s", r.method, r.path)
			if r.method == http.MethodPatch && strings.Contains(r.path, "/apis/"+group+"/") {
				patches++
			}
		}
		GinkgoWriter.Printf("%d responses to the manager, %d of them the migration's patches of widgets, all classified by FlowSchema %s (uid %s)\n",
			len(seen), patches, fs.Name, fs.UID)
		Expect(patches).To(BeNumerically(">=", widgets), "the migration's writes went through the proxy")
	})
})

// flowResponse is what the recording proxy saw of one response.
type flowResponse struct {
	method, path, flowSchema, priorityLevel string
}

// recordingProxy is a plain HTTP front of the API server that authenticates
// as envtest's admin, impersonates one user, and records each response's
// API Priority and Fairness headers.
type recordingProxy struct {
	*httptest.Server
	mu   sync.Mutex
	seen []flowResponse
}

func newRecordingProxy(user string) *recordingProxy {
	GinkgoHelper()
	upstream := rest.CopyConfig(cfg)
	upstream.Impersonate = rest.ImpersonationConfig{UserName: user}
	transport, err := rest.TransportFor(upstream)
	Expect(err).NotTo(HaveOccurred())
	target, err := url.Parse(cfg.Host)
	Expect(err).NotTo(HaveOccurred())
	p := &recordingProxy{}
	p.Server = httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     transport,
		FlushInterval: -1, // watches stream
		ModifyResponse: func(resp *http.Response) error {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.seen = append(p.seen, flowResponse{
				method: resp.Request.Method, path: resp.Request.URL.Path,
				flowSchema:    resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID),
				priorityLevel: resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID),
			})
			return nil
		},
	})
	return p
}

func (p *recordingProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = nil
}

func (p *recordingProxy) responses() []flowResponse {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]flowResponse(nil), p.seen...)
}

// kubeconfig writes a kubeconfig that points at the proxy, with no
// credentials of its own.
func (p *recordingProxy) kubeconfig() string {
	GinkgoHelper()
	config := clientcmdapi.NewConfig()
	config.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.URL}
	config.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	config.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	config.CurrentContext = "proxy"
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(clientcmd.WriteToFile(*config, path)).To(Succeed())
	return path
}
