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
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/test/chart"
)

// The manager as the chart installs it (its arguments, its ServiceAccount and
// RBAC), scraped as Prometheus would: over HTTPS with a ServiceAccount token.
// One group is granted and graduates; the other is not and stalls Forbidden,
// so that every series the dashboard and the alerts read exists.
var _ = Describe("The manager's metrics endpoint, installed by the chart", Ordered, func() {
	const (
		release   = "metrics"
		namespace = "graduator-metrics"
		granted   = "granted.metrics.test.graduator.io"
		denied    = "denied.metrics.test.graduator.io"
		widgets   = 20
	)
	var (
		objs        []*unstructured.Unstructured
		binary      string
		kubeconfig  string // the chart's ServiceAccount, impersonated
		args        []string
		metricsAddr string
		stopManager func()
		clientset   *kubernetes.Clientset
	)

	BeforeAll(func(ctx SpecContext) {
		if _, err := chart.Helm(); err != nil {
			Skip(err.Error())
		}
		var err error
		objs, err = chart.Template(release, namespace, "rbac.migrateGroups={"+granted+"}",
			"metrics.readers[0].kind=ServiceAccount", "metrics.readers[0].name=scraper",
			"metrics.readers[0].namespace="+namespace,
			"metrics.prometheusRule.enabled=true", "metrics.serviceMonitor.enabled=true", "dashboards.enabled=true")
		Expect(err).NotTo(HaveOccurred())
		clientset, err = kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())

		binary = filepath.Join(GinkgoT().TempDir(), "manager")
		build := exec.Command("go", "build", "-o", binary, "github.com/graduator/graduator/cmd/manager")
		build.Stdout, build.Stderr = GinkgoWriter, GinkgoWriter
		Expect(build.Run()).To(Succeed())

		By("installing the chart's ServiceAccount and RBAC, and two ServiceAccounts to scrape with")
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
		for _, obj := range objs {
			switch obj.GetKind() {
			case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			default:
				continue
			}
			Expect(k8sClient.Create(ctx, obj)).To(Succeed(), "create %s %s", obj.GetKind(), obj.GetName())
			if obj.GetNamespace() == "" {
				DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, obj))).To(Succeed()) })
			}
		}
		aggregateClusterRole(ctx, release+"-graduator-migrate")
		for _, name := range []string{"scraper", "stranger"} {
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
			Expect(k8sClient.Create(ctx, sa)).To(Succeed())
		}

		By("two widget CRDs at v1 with policies asking for v2: one group granted, one not")
		for _, group := range []string{granted, denied} {
			widgetsToGraduate(ctx, group, widgets)
		}

		By("running the built manager as the chart's ServiceAccount, with the Deployment's arguments")
		deployment := chart.Find(objs, "Deployment", release+"-graduator")
		Expect(deployment).NotTo(BeNil())
		args = containerArgs(deployment)
		Expect(args).To(ContainElement("--metrics-secure=true"), "the chart serves metrics securely by default")
		user, err := testEnv.AddUser(envtest.User{Name: "metrics-installer", Groups: []string{"system:masters"}}, nil)
		Expect(err).NotTo(HaveOccurred())
		admin, err := user.KubeConfig()
		Expect(err).NotTo(HaveOccurred())
		kubeconfig = impersonating(admin, "system:serviceaccount:"+namespace+":"+release+"-graduator")
		stopManager, metricsAddr = startManagerAs(binary, kubeconfig, args)
		DeferCleanup(func() { stopManager() })

		By("waiting for the granted CRD to graduate and the other to stall Forbidden")
		for name, reason := range map[string]string{
			"widgets." + granted: graduation.ReasonGraduated,
			"widgets." + denied:  graduation.ReasonForbidden,
		} {
			Eventually(func(g Gomega) {
				var policy graduatorv1alpha1.CRDVersionPolicy
				g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, &policy)).To(Succeed())
				g.Expect(meta.FindStatusCondition(policy.Status.Conditions, graduatorv1alpha1.ConditionReady)).To(
					HaveField("Reason", reason))
			}).WithContext(ctx).WithTimeout(90*time.Second).Should(Succeed(), "policy %s", name)
		}
	})

	token := func(ctx context.Context, serviceAccount string) string {
		GinkgoHelper()
		tr, err := clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}},
			metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		return tr.Status.Token
	}

	It("answers 401 without a token, 403 to a token without the metrics-reader rule, and the graduator_ metrics to one with it",
		func(ctx SpecContext) {
			code, _ := scrape(ctx, metricsAddr, "")
			Expect(code).To(Equal(http.StatusUnauthorized))
			code, body := scrape(ctx, metricsAddr, token(ctx, "stranger"))
			Expect(code).To(Equal(http.StatusForbidden), body)
			code, body = scrape(ctx, metricsAddr, token(ctx, "scraper"))
			Expect(code).To(Equal(http.StatusOK), body)
			Expect(body).To(ContainSubstring(`graduator_objects_rewritten_total{crd="widgets.` + granted + `"} ` + fmt.Sprint(widgets)))

			By("and plain HTTP gets no metrics: a TLS server answers it 400")
			resp, err := http.Get("http://" + metricsAddr + "/metrics")
			Expect(err).NotTo(HaveOccurred())
			defer func() { _ = resp.Body.Close() }()
			Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))
		})

	It("serves every metric the dashboard and the PrometheusRule query, with the labels they use", func(ctx SpecContext) {
		var queries []query
		dashboard, err := os.ReadFile(filepath.Join(chart.Dir(), "dashboards", "graduator.json"))
		Expect(err).NotTo(HaveOccurred())
		fromDashboard, err := dashboardQueries(dashboard)
		Expect(err).NotTo(HaveOccurred())
		Expect(len(fromDashboard)).To(BeNumerically(">=", 10), "the dashboard's queries were found")
		queries = append(queries, fromDashboard...)

		By("the dashboard ConfigMap carries the same JSON, labelled for Grafana's sidecar")
		cm := chart.Find(objs, "ConfigMap", release+"-graduator-dashboard")
		Expect(cm).NotTo(BeNil())
		Expect(cm.GetLabels()).To(HaveKeyWithValue("grafana_dashboard", "1"))
		data, _, _ := unstructured.NestedString(cm.Object, "data", "graduator.json")
		Expect(strings.TrimSpace(data)).To(Equal(strings.TrimSpace(string(dashboard))))

		rule := chart.Find(objs, "PrometheusRule", release+"-graduator")
		Expect(rule).NotTo(BeNil())
		groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
		alerts := map[string]bool{}
		for _, g := range groups {
			for _, r := range g.(map[string]any)["rules"].([]any) {
				r := r.(map[string]any)
				alerts[r["alert"].(string)] = true
				queries = append(queries, query{from: "alert " + r["alert"].(string), expr: r["expr"].(string)})
			}
		}
		Expect(alerts).To(HaveKey("GraduatorStalled"))
		Expect(alerts).To(HaveKey("GraduatorStaleStoredVersions"))

		code, body := scrape(ctx, metricsAddr, token(ctx, "scraper"))
		Expect(code).To(Equal(http.StatusOK), body)
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(strings.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		Expect(missing(queries, families)).To(BeEmpty())

		By("the stall is there with its reason, and the graduated CRD at 100%")
		Expect(sample(families, "graduator_policy_stalled", "crd", "widgets."+denied)).To(
			HaveKeyWithValue("reason", graduation.ReasonForbidden))
		Expect(value(families, "graduator_migration_progress_ratio", "crd", "widgets."+granted)).To(Equal(1.0))
	})

	It("refuses HTTP/2 unless --enable-http2", func(ctx SpecContext) {
		Expect(negotiated(metricsAddr)).To(Equal("http/1.1"), "an h2 client gets HTTP/1.1 by default")
		stopManager()
		var http2Addr string
		stopManager, http2Addr = startManagerAs(binary, kubeconfig, append(args, "--enable-http2"))
		Eventually(func() (string, error) { return negotiatedOrError(http2Addr) }).
			WithTimeout(30 * time.Second).Should(Equal("h2"))
	})
})

// The extraction the metric check relies on finds what it must, so that a
// query naming a metric the manager does not serve fails the spec above.
var _ = Describe("The metric check of dashboards and alerts", func() {
	It("names a family that is not served and a label no series has", func() {
		families := map[string]*dto.MetricFamily{
			"graduator_x": {Name: ptr.To("graduator_x"), Metric: []*dto.Metric{{Label: []*dto.LabelPair{
				{Name: ptr.To("crd"), Value: ptr.To("a")}}}}},
		}
		Expect(missing([]query{{from: "ok", expr: `sum by (crd) (rate(graduator_x{crd=~"$crd"}[5m]))`}}, families)).To(BeEmpty())
		Expect(missing([]query{{from: "unknown", expr: `graduator_y > 0`}}, families)).To(ConsistOf(
			ContainSubstring("graduator_y is not served")))
		Expect(missing([]query{{from: "label", expr: `max by (crd, reason) (graduator_x) > 0`}}, families)).To(ConsistOf(
			ContainSubstring(`no series of graduator_x has the label "reason"`)))
	})
})

// scrape GETs /metrics over HTTPS (the certificate is self-signed) with the
// bearer token, if any, and returns the status code and body.
func scrape(ctx context.Context, addr, token string) (int, string) {
	GinkgoHelper()
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the endpoint's certificate is self-signed
	}}
	var code int
	var body string
	Eventually(func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		data, err := io.ReadAll(resp.Body)
		code, body = resp.StatusCode, string(data)
		return err
	}).WithTimeout(30 * time.Second).Should(Succeed())
	return code, body
}

// negotiated returns the protocol an HTTP/2-capable client agrees on by ALPN.
func negotiated(addr string) string {
	GinkgoHelper()
	proto, err := negotiatedOrError(addr)
	Expect(err).NotTo(HaveOccurred())
	return proto
}

func negotiatedOrError(addr string) (string, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // the endpoint's certificate is self-signed
		NextProtos:         []string{"h2", "http/1.1"},
	})
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().NegotiatedProtocol, nil
}

// sample returns the labels of the family's series whose label key has the
// value, nil when there is none.
func sample(families map[string]*dto.MetricFamily, family, key, val string) map[string]string {
	for _, m := range families[family].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels[key] == val {
			return labels
		}
	}
	return nil
}

// value returns the gauge value of the family's series whose label key has
// the value.
func value(families map[string]*dto.MetricFamily, family, key, val string) float64 {
	for _, m := range families[family].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == key && l.GetValue() == val {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}
