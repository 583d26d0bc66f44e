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

package chart_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/graduator/graduator/internal/access"
	"github.com/graduator/graduator/test/chart"
)

const (
	release   = "graduator"
	namespace = "graduator-system"
)

// render renders the chart or skips the test when helm is not built.
func render(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := chart.Template(release, namespace, set...)
	if errors.Is(err, chart.ErrNoHelm) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func convert[T any](t *testing.T, obj *unstructured.Unstructured) *T {
	t.Helper()
	if obj == nil {
		t.Fatalf("the chart does not render the %T", new(T))
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func readYAML[T any](t *testing.T, path ...string) *T {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(append([]string{chart.Root()}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	out := new(T)
	if err := yaml.Unmarshal(data, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTheChartInstallsTheGeneratedCRD(t *testing.T) {
	generated, err := os.ReadFile(filepath.Join(chart.Root(), "config", "crd", "bases", "graduator.io_crdversionpolicies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	inChart, err := os.ReadFile(filepath.Join(chart.Dir(), "crds", "graduator.io_crdversionpolicies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(generated, inChart) {
		t.Error("charts/graduator/crds/ differs from config/crd/bases/: run `make manifests` (it copies the CRD into the chart)")
	}
}

func TestHelmLintIsClean(t *testing.T) {
	for _, set := range [][]string{
		nil,
		{"replicas=2", "rbac.migrateGroups={example.com}", "metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true",
			"dashboards.enabled=true", "metrics.certSecret=metrics-tls", "metrics.readers[0].kind=ServiceAccount",
			"metrics.readers[0].name=prometheus", "metrics.readers[0].namespace=monitoring", "enableHTTP2=true"},
		{"rbac.allGroups=true", "metrics.secure=false", "metrics.port=8080", "metrics.serviceMonitor.enabled=true"},
		{"apf.enabled=false"},
		{"scan.enabled=true", "scan.cronJob.enabled=true", "scan.cronJob.extraArgs={-o,json}", "scan.serviceAccount.name=ci-scan"},
		{"apf.nominalConcurrencyShares=40", "apf.lendablePercent=0", "apf.borrowingLimitPercent=100", "apf.queues=64", "apf.handSize=8", "apf.queueLengthLimit=100"},
	} {
		args := []string{"lint", "--strict", chart.Dir()}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		out, err := chart.Run(args...)
		if errors.Is(err, chart.ErrNoHelm) {
			t.Skip(err)
		}
		if err != nil || strings.Contains(string(out), "[WARNING]") || strings.Contains(string(out), "[ERROR]") {
			t.Errorf("helm lint with %v: %v\n%s", set, err, out)
		}
	}
}

// The chart's base ClusterRole is what the code's markers generate into
// config/rbac/role.yaml: one RBAC model for kustomize and Helm.
func TestTheBaseClusterRoleIsTheGeneratedOne(t *testing.T) {
	objs := render(t)
	got := convert[rbacv1.ClusterRole](t, chart.Find(objs, "ClusterRole", release+"-manager"))
	want := readYAML[rbacv1.ClusterRole](t, "config", "rbac", "role.yaml")
	if diff := cmp.Diff(want.Rules, got.Rules); diff != "" {
		t.Errorf("the chart's base ClusterRole differs from config/rbac/role.yaml (-generated +chart):\n%s", diff)
	}
	// The lease Role and the aggregation are the same in config/rbac.
	lease := convert[rbacv1.Role](t, chart.Find(objs, "Role", release+"-leader-election"))
	if lease.Namespace != namespace {
		t.Errorf("the lease Role is in namespace %q, want %q", lease.Namespace, namespace)
	}
	if diff := cmp.Diff(readYAML[rbacv1.Role](t, "config", "rbac", "leader_election_role.yaml").Rules, lease.Rules); diff != "" {
		t.Errorf("the lease Role differs from config/rbac/leader_election_role.yaml (-kustomize +chart):\n%s", diff)
	}
	// The etcd space ledger's Role is in kube-system, where its Lease is.
	ledger := convert[rbacv1.Role](t, chart.Find(objs, "Role", release+"-etcd-space-ledger"))
	if ledger.Namespace != "kube-system" {
		t.Errorf("the etcd space ledger's Role is in namespace %q, want kube-system", ledger.Namespace)
	}
	if diff := cmp.Diff(readYAML[rbacv1.Role](t, "config", "rbac", "space-ledger", "role.yaml").Rules, ledger.Rules); diff != "" {
		t.Errorf("the etcd space ledger's Role differs from config/rbac/space-ledger/role.yaml (-kustomize +chart):\n%s", diff)
	}
	migrate := convert[rbacv1.ClusterRole](t, chart.Find(objs, "ClusterRole", release+"-migrate"))
	if diff := cmp.Diff(readYAML[rbacv1.ClusterRole](t, "config", "rbac", "migrate_role.yaml").AggregationRule, migrate.AggregationRule); diff != "" {
		t.Errorf("the migrate ClusterRole's aggregation differs from config/rbac/migrate_role.yaml (-kustomize +chart):\n%s", diff)
	}
	example := readYAML[rbacv1.ClusterRole](t, "config", "rbac", "migrate_group_example.yaml")
	if example.Labels[access.AggregationLabel] != "true" || len(example.Rules) != 1 || example.Rules[0].APIGroups[0] != "example.com" {
		t.Errorf("config/rbac/migrate_group_example.yaml is not a labelled one-group rule: %+v", example)
	}
}

// grants returns the rules of every ClusterRole and Role the chart renders
// that the ServiceAccount ends up with: bound roles, and labelled roles
// aggregated into the migrate role.
func grants(t *testing.T, objs []*unstructured.Unstructured) (migrate []rbacv1.PolicyRule, all []rbacv1.PolicyRule) {
	t.Helper()
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole":
			role := convert[rbacv1.ClusterRole](t, o)
			if role.Labels[access.AggregationLabel] == "true" {
				migrate = append(migrate, role.Rules...)
			}
			all = append(all, role.Rules...)
		case "Role":
			all = append(all, convert[rbacv1.Role](t, o).Rules...)
		}
	}
	return migrate, all
}

func reaches(rule rbacv1.PolicyRule, group, resource string) bool {
	return (slices.Contains(rule.APIGroups, group) || slices.Contains(rule.APIGroups, "*")) &&
		(slices.Contains(rule.Resources, resource) || slices.Contains(rule.Resources, "*"))
}

func TestRBACScope(t *testing.T) {
	rule := func(group string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{"*"}, Verbs: []string{"get", "list", "patch", "watch"}}
	}
	for _, tc := range []struct {
		name         string
		set          []string
		wantMigrate  []rbacv1.PolicyRule
		secretsReach bool
	}{
		{"by default nothing can be migrated", nil, nil, false},
		{"each granted group gets get, list, patch, watch on every resource",
			[]string{"rbac.migrateGroups={a.example.com,b.example.com}"}, []rbacv1.PolicyRule{rule("a.example.com"), rule("b.example.com")}, false},
		{"allGroups is every group, Secrets included: an explicit opt-in",
			[]string{"rbac.allGroups=true"}, []rbacv1.PolicyRule{rule("*")}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, tc.set...)
			migrate, all := grants(t, objs)
			if diff := cmp.Diff(tc.wantMigrate, migrate); diff != "" {
				t.Errorf("migration rules (-want +got):\n%s", diff)
			}
			secrets := slices.ContainsFunc(all, func(r rbacv1.PolicyRule) bool { return reaches(r, "", "secrets") })
			if secrets != tc.secretsReach {
				t.Errorf("a rule reaches core Secrets: %v, want %v", secrets, tc.secretsReach)
			}
			for _, r := range all {
				if slices.Contains(r.Verbs, "update") && !slices.Equal(r.Resources, []string{"leases"}) {
					t.Errorf("rule %+v grants update, which nothing but the lease uses", r)
				}
			}
			for _, o := range objs {
				if o.GetKind() == "ClusterRole" && strings.Contains(toYAML(t, o), "leases") {
					t.Errorf("ClusterRole %s grants leases cluster-wide; they belong in the namespaced Role", o.GetName())
				}
			}
		})
	}
}

func toYAML(t *testing.T, o *unstructured.Unstructured) string {
	data, err := yaml.Marshal(o.Object)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestTheChartRefusesGroupsThatHoldNoCRD(t *testing.T) {
	for _, group := range []string{`""`, "apps", "*.example.com"} {
		_, err := chart.Template(release, namespace, "rbac.migrateGroups={"+group+"}")
		if errors.Is(err, chart.ErrNoHelm) {
			t.Skip(err)
		}
		if err == nil || !strings.Contains(err.Error(), "is not the group of a CRD") {
			t.Errorf("rbac.migrateGroups={%s}: %v, want a refusal", group, err)
		}
	}
}

func TestTheDeployment(t *testing.T) {
	for _, tc := range []struct {
		name        string
		set         []string
		leaderElect bool
	}{
		{"one replica runs without leader election", nil, false},
		{"two replicas elect a leader in the release's namespace", []string{"replicas=2"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := append([]string{"nodeSelector.pool=system", "tolerations[0].key=dedicated", "tolerations[0].operator=Exists",
				"metrics.port=9090", "image.repository=registry.example.com/graduator"}, tc.set...)
			d := convert[appsv1.Deployment](t, chart.Find(render(t, set...), "Deployment", release))
			pod := d.Spec.Template.Spec
			c := pod.Containers[0]
			if c.Image != "registry.example.com/graduator:0.1.0" {
				t.Errorf("image %q: want the repository at the chart's appVersion", c.Image)
			}
			hasLeader := slices.Contains(c.Args, "--leader-elect") && slices.Contains(c.Args, "--leader-election-namespace="+namespace)
			if hasLeader != tc.leaderElect {
				t.Errorf("args %v: leader election %v, want %v", c.Args, hasLeader, tc.leaderElect)
			}
			if !slices.Contains(c.Args, "--metrics-bind-address=:9090") || c.Ports[0].ContainerPort != 9090 {
				t.Errorf("the metrics port is not 9090: args %v, ports %v", c.Args, c.Ports)
			}
			psc, sc := pod.SecurityContext, c.SecurityContext
			switch {
			case psc == nil || sc == nil:
				t.Fatal("no security context")
			case psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot, psc.RunAsUser == nil || *psc.RunAsUser != 65532,
				psc.SeccompProfile == nil || psc.SeccompProfile.Type != "RuntimeDefault":
				t.Errorf("pod security context %+v: want non-root 65532 and seccomp RuntimeDefault", psc)
			case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem, sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation,
				sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}):
				t.Errorf("container security context %+v: want a read-only root, no privilege escalation, drop ALL", sc)
			}
			if pod.NodeSelector["pool"] != "system" || len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "dedicated" {
				t.Errorf("nodeSelector %v, tolerations %v: not passed through", pod.NodeSelector, pod.Tolerations)
			}
			if pod.ServiceAccountName != release {
				t.Errorf("serviceAccountName %q, want %q", pod.ServiceAccountName, release)
			}
		})
	}
}

func TestMonitoringIsOffByDefault(t *testing.T) {
	objs := render(t)
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		if chart.Find(objs, kind, release) != nil {
			t.Errorf("a %s is rendered by default", kind)
		}
	}
	if chart.Find(objs, "ConfigMap", release+"-dashboard") != nil {
		t.Errorf("the dashboard ConfigMap is rendered by default")
	}
	objs = render(t, "metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true")
	sm := chart.Find(objs, "ServiceMonitor", release)
	if sm == nil || !strings.Contains(toYAML(t, sm), "port: metrics") {
		t.Errorf("no ServiceMonitor scraping the metrics port when enabled")
	}
	rule := chart.Find(objs, "PrometheusRule", release)
	if rule == nil {
		t.Fatal("no PrometheusRule when enabled")
	}
	text := toYAML(t, rule)
	for _, want := range []string{"alert: GraduatorStaleStoredVersions", "graduator_crd_stale_stored_versions", "{{ $labels.crd }}"} {
		if !strings.Contains(text, want) {
			t.Errorf("the PrometheusRule does not contain %q:\n%s", want, text)
		}
	}
}

// Metrics are HTTPS behind TokenReview and SubjectAccessReview by default; the
// ServiceMonitor scrapes them as the Prometheus Operator can, and who may
// read them is a ClusterRole to bind.
func TestMetricsAreSecureByDefault(t *testing.T) {
	objs := render(t, "metrics.serviceMonitor.enabled=true", "metrics.readers[0].kind=ServiceAccount",
		"metrics.readers[0].name=prometheus-k8s", "metrics.readers[0].namespace=monitoring")
	c := convert[appsv1.Deployment](t, chart.Find(objs, "Deployment", release)).Spec.Template.Spec.Containers[0]
	for _, want := range []string{"--metrics-bind-address=:8443", "--metrics-secure=true"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %v lack %s", c.Args, want)
		}
	}
	if slices.Contains(c.Args, "--enable-http2") {
		t.Errorf("args %v turn HTTP/2 on by default", c.Args)
	}
	if c.LivenessProbe.HTTPGet.Scheme == corev1.URISchemeHTTPS || c.LivenessProbe.HTTPGet.Port.StrVal != "probes" {
		t.Errorf("the health probes left plain HTTP on their own port: %+v", c.LivenessProbe.HTTPGet)
	}
	sm := toYAML(t, chart.Find(objs, "ServiceMonitor", release))
	for _, want := range []string{"scheme: https", "bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token",
		"insecureSkipVerify: true"} {
		if !strings.Contains(sm, want) {
			t.Errorf("the ServiceMonitor lacks %q:\n%s", want, sm)
		}
	}
	reader := convert[rbacv1.ClusterRole](t, chart.Find(objs, "ClusterRole", release+"-metrics-reader"))
	if want := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}; !cmp.Equal(want, reader.Rules) {
		t.Errorf("metrics-reader rules %+v, want %+v", reader.Rules, want)
	}
	binding := convert[rbacv1.ClusterRoleBinding](t, chart.Find(objs, "ClusterRoleBinding", release+"-metrics-reader"))
	if len(binding.Subjects) != 1 || binding.Subjects[0].Name != "prometheus-k8s" || binding.RoleRef.Name != release+"-metrics-reader" {
		t.Errorf("metrics.readers not bound: %+v", binding)
	}
	base := convert[rbacv1.ClusterRole](t, chart.Find(objs, "ClusterRole", release+"-manager"))
	for _, want := range []string{"tokenreviews", "subjectaccessreviews"} {
		if !slices.ContainsFunc(base.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.Resources, want) && slices.Contains(r.Verbs, "create")
		}) {
			t.Errorf("the manager may not create %s, which the secure endpoint needs", want)
		}
	}

	plain := render(t, "metrics.secure=false", "metrics.port=8080", "metrics.serviceMonitor.enabled=true", "enableHTTP2=true")
	args := convert[appsv1.Deployment](t, chart.Find(plain, "Deployment", release)).Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--metrics-secure=false") || !slices.Contains(args, "--enable-http2") {
		t.Errorf("metrics.secure=false, enableHTTP2=true: args %v", args)
	}
	if sm := toYAML(t, chart.Find(plain, "ServiceMonitor", release)); !strings.Contains(sm, "scheme: http\n") ||
		strings.Contains(sm, "bearerTokenFile") {
		t.Errorf("metrics.secure=false: the ServiceMonitor should scrape plain HTTP:\n%s", sm)
	}
}

func TestTheDashboardShipsAsAConfigMapForGrafanasSidecar(t *testing.T) {
	objs := render(t, "dashboards.enabled=true", "dashboards.namespace=grafana")
	cm := chart.Find(objs, "ConfigMap", release+"-dashboard")
	if cm == nil {
		t.Fatal("no dashboard ConfigMap with dashboards.enabled")
	}
	if cm.GetNamespace() != "grafana" || cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("the ConfigMap is in %q with labels %v: want grafana and grafana_dashboard=1", cm.GetNamespace(), cm.GetLabels())
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", "graduator.json")
	file, err := os.ReadFile(filepath.Join(chart.Dir(), "dashboards", "graduator.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(data) != strings.TrimSpace(string(file)) {
		t.Errorf("the ConfigMap's dashboard differs from dashboards/graduator.json")
	}
	var dash struct {
		UID    string           `json:"uid"`
		Panels []map[string]any `json:"panels"`
	}
	if err := json.Unmarshal(file, &dash); err != nil || dash.UID == "" || len(dash.Panels) < 8 {
		t.Errorf("dashboards/graduator.json: %v, uid %q, %d panels", err, dash.UID, len(dash.Panels))
	}
}

// API Priority and Fairness: by default the chart puts the Deployment's
// ServiceAccount, and nothing else, in a limited, queuing priority level of
// its own, ahead of the built-in service-accounts FlowSchema; values size it
// or turn it off; config/flowcontrol ships the same objects.
func TestAPIPriorityAndFairness(t *testing.T) {
	objs := render(t)
	plc := convert[flowcontrolv1.PriorityLevelConfiguration](t, chart.Find(objs, "PriorityLevelConfiguration", release))
	fs := convert[flowcontrolv1.FlowSchema](t, chart.Find(objs, "FlowSchema", release))
	d := convert[appsv1.Deployment](t, chart.Find(objs, "Deployment", release))
	if plc.Spec.Type != flowcontrolv1.PriorityLevelEnablementLimited || plc.Spec.Limited == nil ||
		plc.Spec.Limited.LimitResponse.Type != flowcontrolv1.LimitResponseTypeQueue || plc.Spec.Limited.LimitResponse.Queuing == nil {
		t.Fatalf("the priority level is not limited with queuing: %+v", plc.Spec)
	}
	if fs.Spec.PriorityLevelConfiguration.Name != plc.Name {
		t.Errorf("the FlowSchema points at %q, not at the chart's priority level %q", fs.Spec.PriorityLevelConfiguration.Name, plc.Name)
	}
	if fs.Spec.MatchingPrecedence >= 9000 {
		t.Errorf("matchingPrecedence %d: the built-in service-accounts FlowSchema (9000) would match first", fs.Spec.MatchingPrecedence)
	}
	wantSubject := []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount,
		ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Name: d.Spec.Template.Spec.ServiceAccountName, Namespace: namespace}}}
	if len(fs.Spec.Rules) != 1 || !cmp.Equal(fs.Spec.Rules[0].Subjects, wantSubject) {
		t.Errorf("the FlowSchema's rules %+v: want one rule for the Deployment's ServiceAccount only", fs.Spec.Rules)
	}

	sized := render(t, "apf.nominalConcurrencyShares=40", "apf.lendablePercent=0", "apf.borrowingLimitPercent=100",
		"apf.queues=64", "apf.handSize=8", "apf.queueLengthLimit=100", "apf.matchingPrecedence=7000", "serviceAccount.name=migrator")
	limited := convert[flowcontrolv1.PriorityLevelConfiguration](t, chart.Find(sized, "PriorityLevelConfiguration", release)).Spec.Limited
	queuing := limited.LimitResponse.Queuing
	if *limited.NominalConcurrencyShares != 40 || *limited.LendablePercent != 0 || limited.BorrowingLimitPercent == nil ||
		*limited.BorrowingLimitPercent != 100 || queuing.Queues != 64 || queuing.HandSize != 8 || queuing.QueueLengthLimit != 100 {
		t.Errorf("the values do not size the priority level: %+v, queuing %+v", limited, queuing)
	}
	sizedFS := convert[flowcontrolv1.FlowSchema](t, chart.Find(sized, "FlowSchema", release))
	if sizedFS.Spec.MatchingPrecedence != 7000 || sizedFS.Spec.Rules[0].Subjects[0].ServiceAccount.Name != "migrator" {
		t.Errorf("the FlowSchema does not follow the values: %+v", sizedFS.Spec)
	}
	if plc.Spec.Limited.BorrowingLimitPercent != nil {
		t.Errorf("borrowingLimitPercent is set by default (%d): an idle server could not lend the migration its full speed", *plc.Spec.Limited.BorrowingLimitPercent)
	}

	for _, o := range render(t, "apf.enabled=false") {
		if o.GetKind() == "FlowSchema" || o.GetKind() == "PriorityLevelConfiguration" {
			t.Errorf("apf.enabled=false still renders the %s", o.GetKind())
		}
	}

	// config/flowcontrol: the same priority level, and a FlowSchema that
	// differs only by names kustomize prefixes.
	data, err := os.ReadFile(filepath.Join(chart.Root(), "config", "flowcontrol", "flowcontrol.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kustomize, err := chart.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	kplc := convert[flowcontrolv1.PriorityLevelConfiguration](t, chart.Find(kustomize, "PriorityLevelConfiguration", "manager"))
	if diff := cmp.Diff(plc.Spec, kplc.Spec); diff != "" {
		t.Errorf("config/flowcontrol's priority level differs from the chart's (-chart +kustomize):\n%s", diff)
	}
	kfs := convert[flowcontrolv1.FlowSchema](t, chart.Find(kustomize, "FlowSchema", "manager"))
	kfs.Spec.PriorityLevelConfiguration.Name = fs.Spec.PriorityLevelConfiguration.Name
	kfs.Spec.Rules[0].Subjects[0].ServiceAccount.Name = release
	kfs.Spec.Rules[0].Subjects[0].ServiceAccount.Namespace = namespace
	if diff := cmp.Diff(fs.Spec, kfs.Spec); diff != "" {
		t.Errorf("config/flowcontrol's FlowSchema differs from the chart's (-chart +kustomize):\n%s", diff)
	}
}

// The in-tree engine's rights are granted only when the value enables it,
// and they are exactly what access.InTreeNeeds checks.
func TestInTreeEngineRBAC(t *testing.T) {
	var verbs []string
	for _, need := range access.InTreeNeeds() {
		verbs = append(verbs, need.Verb)
	}
	want := rbacv1.PolicyRule{APIGroups: []string{access.StorageVersionMigrations.Group},
		Resources: []string{access.StorageVersionMigrations.Resource}, Verbs: verbs}
	for _, tc := range []struct {
		name  string
		set   []string
		grant bool
	}{
		{"off by default", nil, false},
		{"inTreeEngine.enabled grants create, get, watch and delete on storageversionmigrations",
			[]string{"inTreeEngine.enabled=true"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			migrate, all := grants(t, render(t, tc.set...))
			if got := slices.ContainsFunc(all, func(r rbacv1.PolicyRule) bool {
				return reaches(r, access.StorageVersionMigrations.Group, access.StorageVersionMigrations.Resource)
			}); got != tc.grant {
				t.Errorf("a rule reaches storageversionmigrations: %v, want %v", got, tc.grant)
			}
			if tc.grant && !slices.ContainsFunc(migrate, func(r rbacv1.PolicyRule) bool { return cmp.Equal(r, want) }) {
				t.Errorf("no aggregated rule %+v in %+v", want, migrate)
			}
		})
	}
}

// scan.enabled renders the scan's read-only ClusterRole, the same as
// config/scan/role.yaml, bound to a ServiceAccount of its own; only get and
// list, and no Secret. The CronJob runs the scan as that ServiceAccount.
func TestTheScanRoleIsReadOnlyAndTheManifests(t *testing.T) {
	if obj := chart.Find(render(t), "ClusterRole", release+"-scan"); obj != nil {
		t.Fatal("the scan's ClusterRole is rendered by default")
	}
	objs := render(t, "scan.enabled=true", "scan.cronJob.enabled=true")
	role := convert[rbacv1.ClusterRole](t, chart.Find(objs, "ClusterRole", release+"-scan"))
	if diff := cmp.Diff(readYAML[rbacv1.ClusterRole](t, "config", "scan", "role.yaml").Rules, role.Rules); diff != "" {
		t.Errorf("the scan's rules differ from config/scan/role.yaml (-kustomize +chart):\n%s", diff)
	}
	for _, r := range role.Rules {
		for _, verb := range r.Verbs {
			if verb != "get" && verb != "list" {
				t.Errorf("the scan's role grants %s on %v", verb, r.Resources)
			}
		}
		if reaches(r, "", "secrets") {
			t.Errorf("the scan's role reaches secrets: %+v", r)
		}
	}
	binding := convert[rbacv1.ClusterRoleBinding](t, chart.Find(objs, "ClusterRoleBinding", release+"-scan"))
	want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: release + "-scan", Namespace: namespace}}
	if binding.RoleRef.Name != role.Name || !cmp.Equal(binding.Subjects, want) {
		t.Errorf("the binding %+v does not bind %s to %+v", binding, role.Name, want)
	}
	if chart.Find(objs, "ServiceAccount", release+"-scan") == nil {
		t.Error("no ServiceAccount for the scan")
	}
	job := chart.Find(objs, "CronJob", release+"-scan")
	if job == nil {
		t.Fatal("scan.cronJob.enabled renders no CronJob")
	}
	sa, _, _ := unstructured.NestedString(job.Object, "spec", "jobTemplate", "spec", "template", "spec", "serviceAccountName")
	containers, _, _ := unstructured.NestedSlice(job.Object, "spec", "jobTemplate", "spec", "template", "spec", "containers")
	if sa != release+"-scan" || len(containers) != 1 ||
		!strings.Contains(strings.Join(stringsOf(containers[0].(map[string]any)["command"]), " "), "/graduator scan --fail-on warning") {
		t.Errorf("the CronJob runs %v as %q", containers, sa)
	}
}

func stringsOf(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// prepare.enabled renders prepare's ClusterRole, the same as
// config/prepare/role.yaml, and one granting get, list and patch on every
// resource of each group in prepare.groups, both bound to a ServiceAccount of
// its own; no create, no delete, no Secret.
func TestThePrepareRolesAndTheManifests(t *testing.T) {
	if obj := chart.Find(render(t), "ClusterRole", release+"-prepare"); obj != nil {
		t.Fatal("prepare's ClusterRole is rendered by default")
	}
	objs := render(t, "prepare.enabled=true", "prepare.groups={example.com,other.example}")
	role := convert[rbacv1.ClusterRole](t, chart.Find(objs, "ClusterRole", release+"-prepare"))
	if diff := cmp.Diff(readYAML[rbacv1.ClusterRole](t, "config", "prepare", "role.yaml").Rules, role.Rules); diff != "" {
		t.Errorf("prepare's rules differ from config/prepare/role.yaml (-kustomize +chart):\n%s", diff)
	}
	groups := convert[rbacv1.ClusterRole](t, chart.Find(objs, "ClusterRole", release+"-prepare-groups"))
	var want []rbacv1.PolicyRule
	for _, g := range []string{"example.com", "other.example"} {
		want = append(want, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{"*"}, Verbs: []string{"get", "list", "patch"}})
	}
	if diff := cmp.Diff(want, groups.Rules); diff != "" {
		t.Errorf("the groups' rules (-want +got):\n%s", diff)
	}
	for _, r := range append(role.Rules, groups.Rules...) {
		for _, verb := range r.Verbs {
			if verb != "get" && verb != "list" && verb != "patch" {
				t.Errorf("prepare's roles grant %s on %v", verb, r.Resources)
			}
		}
		if reaches(r, "", "secrets") {
			t.Errorf("prepare's roles reach secrets: %+v", r)
		}
	}
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: release + "-prepare", Namespace: namespace}}
	for _, name := range []string{release + "-prepare", release + "-prepare-groups"} {
		binding := convert[rbacv1.ClusterRoleBinding](t, chart.Find(objs, "ClusterRoleBinding", name))
		if binding.RoleRef.Name != name || !cmp.Equal(binding.Subjects, subjects) {
			t.Errorf("the binding %+v does not bind %s to %+v", binding, name, subjects)
		}
	}
	if chart.Find(objs, "ServiceAccount", release+"-prepare") == nil {
		t.Error("no ServiceAccount for prepare")
	}
	empty := convert[rbacv1.ClusterRole](t, chart.Find(render(t, "prepare.enabled=true"), "ClusterRole", release+"-prepare-groups"))
	if len(empty.Rules) != 0 {
		t.Errorf("without groups the groups' role grants %+v", empty.Rules)
	}
}
