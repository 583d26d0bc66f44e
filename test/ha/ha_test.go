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
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/crdmigrate"
	"github.com/graduator/graduator/graduationtest"
	"github.com/graduator/graduator/internal/driver"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/migration"
	"github.com/graduator/graduator/test/envtestutil"
)

var groups atomic.Int32

// population is how many objects each spec graduates: HA_OBJECTS, 600 by
// default.
func population() int {
	if s := os.Getenv("HA_OBJECTS"); s != "" {
		n, err := strconv.Atoi(s)
		Expect(err).NotTo(HaveOccurred(), "HA_OBJECTS")
		return n
	}
	return 600
}

// fixture is a CRD storing v1 (v2 served, the same schema) with objects
// created through A, once every API server serves it.
type fixture struct {
	crd   *apiextensionsv1.CustomResourceDefinition
	group string
	n     int
}

func newFixture(ctx context.Context) *fixture {
	f := &fixture{group: fmt.Sprintf("h%d.ha.test.graduator.io", groups.Add(1)), n: population()}
	f.crd = envtestutil.WidgetCRD(f.group, "v1", "v2")
	Expect(env.Client.Create(ctx, f.crd)).To(Succeed())
	for _, s := range servers {
		cfg := rest.CopyConfig(env.Config)
		cfg.Host, cfg.ServerName = "https://"+s, "127.0.0.1" // the name the certificate has
		disco := discovery.NewDiscoveryClientForConfigOrDie(cfg)
		Eventually(func() error {
			_, err := disco.ServerResourcesForGroupVersion(f.group + "/v1")
			return err
		}).WithTimeout(time.Minute).Should(Succeed(), "%s serves the new CRD", s)
	}
	v1 := envtestutil.WidgetResource(f.group, "v1")
	Expect(envtestutil.CreateObjects(ctx, env.Dynamic, v1, f.n, 8, func(i int) *unstructured.Unstructured {
		return envtestutil.Widget(v1, "default", fmt.Sprintf("w-%05d", i), map[string]any{"color": "blue", "size": int64(i)})
	})).To(Succeed())
	Expect(f.stored(ctx)).To(Equal(map[string]int{f.group + "/v1": f.n}))
	return f
}

// stored counts the objects in etcd by the apiVersion they are encoded in.
func (f *fixture) stored(ctx context.Context) map[string]int {
	counts, err := env.Etcd.Counts(ctx, f.group, "widgets")
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return counts
}

// expectGraduated reads etcd and the CRD: every object stored as v2, and
// storedVersions pruned to it.
func (f *fixture) expectGraduated(ctx context.Context) {
	ExpectWithOffset(1, f.stored(ctx)).To(Equal(map[string]int{f.group + "/v2": f.n}),
		"etcd holds every object as v2 once storedVersions is pruned")
	var crd apiextensionsv1.CustomResourceDefinition
	ExpectWithOffset(1, env.Client.Get(ctx, client.ObjectKeyFromObject(f.crd), &crd)).To(Succeed())
	ExpectWithOffset(1, crd.Status.StoredVersions).To(Equal([]string{"v2"}))
}

// expectSpread checks that the balancer sent connections to every server
// since before: the run's requests went through the late one too.
func expectSpread(before map[string]int) {
	after := balancer.Connections()
	for _, s := range servers {
		ExpectWithOffset(1, after[s]-before[s]).To(BeNumerically(">", 0), "connections to %s: %v", s, after)
	}
	GinkgoWriter.Printf("connections per API server during the spec: before %v, after %v\n", before, after)
}

// startOnA sends the door's first connections to A. They carry the run's
// reads before its first write (its pool of connections grows while they
// go, and an idle one is taken again at random); were one of them C's, a
// read there would wait for C to catch up, or its discovery would show the
// old hash, and the pass would start only once C writes v2, whatever the
// plan checked. The spec is about the other case: a run that starts while C
// still writes v1, its writers' connections spread over the three servers.
func startOnA() { balancer.Pin(servers[0], 4) }

// logReporter tells the driver's Events in the spec's log, and keeps what
// the plans waited for.
type logReporter struct {
	mu     sync.Mutex
	waited []string
}

// waitedFor reports whether a plan waited for server.
func (r *logReporter) waitedFor(server string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.waited, func(w string) bool { return strings.Contains(w, "API server "+server) })
}

func (*logReporter) Event(_ *graduatorv1alpha1.CRDVersionPolicy, _ *apiextensionsv1.CustomResourceDefinition,
	eventType, reason, action, message string) {
	GinkgoWriter.Printf("%s %s (%s): %s\n", action, reason, eventType, message)
}

func (r *logReporter) Planned(_ *graduatorv1alpha1.CRDVersionPolicy, s graduation.Step, _ graduatorv1alpha1.Phase) {
	if strings.Contains(s.Message(), "settling") {
		r.mu.Lock()
		r.waited = append(r.waited, s.Message())
		r.mu.Unlock()
	}
}

var _ = Describe("Three API servers on one etcd, one learning the storage switch late", func() {
	It("graduator migrate --prune, run as the storage switch is applied, leaves nothing stored in the old version", func(ctx SpecContext) {
		f := newFixture(ctx)
		before := balancer.Connections()
		start := time.Now()
		switchLate(ctx, f.crd.Name)
		startOnA()
		cmd := exec.Command(cliBinary, "migrate", f.crd.Name, "--prune", "-o", "json", "--kubeconfig", kubeconfig)
		// One connection per request in flight, spread by the balancer.
		cmd.Env = append(os.Environ(), "DISABLE_HTTP2=true")
		session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(session).WithTimeout(3 * time.Minute).Should(gexec.Exit())
		GinkgoWriter.Printf("migrate --prune took %s\n", time.Since(start).Round(time.Millisecond))
		Expect(session.ExitCode()).To(BeZero(), string(session.Err.Contents()))
		var summary struct {
			Pruned     bool
			APIServers string
		}
		Expect(json.Unmarshal(session.Out.Contents(), &summary)).To(Succeed())
		Expect(summary.Pruned).To(BeTrue())
		f.expectGraduated(ctx)
		expectSpread(before)
		Expect(summary.APIServers).To(ContainSubstring("every one of 3 API servers"))
	})

	It("the operator's driver, run as the storage switch is applied, leaves nothing stored in the old version", func(ctx SpecContext) {
		f := newFixture(ctx)
		// The operator's sequence and settings (package driver, the
		// policy's default settle delay), its state in memory. Its reads go
		// to A and the migration's writes through the balancer: a read
		// before the first write that went to C would wait for C to catch
		// up, and the pass would start late whatever the plan checked.
		reporter := &logReporter{}
		d := &driver.Driver{
			Clients: driver.Clients{Client: env.Client, Reader: env.Client, Dynamic: env.Dynamic, Config: balanced,
				Discovery: discovery.NewDiscoveryClientForConfigOrDie(env.Config),
				Reviews:   authorizationv1client.NewForConfigOrDie(env.Config).SelfSubjectAccessReviews()},
			Reporter: reporter,
		}
		policy := &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: f.crd.Name, Generation: 1},
			Spec: graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v2",
				Migration: driver.Settings(migration.WriteToObject, graduation.DefaultSettleDelay, nil)},
		}
		before := balancer.Connections()
		start := time.Now()
		// C is held, not late by a fixed lag: on a loaded machine the
		// driver's first check came after an 8 s lag had run out, C
		// already agreeing, and the spec could not see the plan wait.
		release := switchHeld(ctx, f.crd.Name, func() bool { return reporter.waitedFor(servers[2]) })
		defer release()
		out, err := d.Finish(ctx, &driver.MemoryStore{Policy: policy.DeepCopy()}, policy, 2*time.Minute)
		GinkgoWriter.Printf("the graduation took %s: %s\n", time.Since(start).Round(time.Millisecond), out.Step.Message())
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Failure()).NotTo(HaveOccurred())
		Expect(out.Step.Phase).To(Equal(graduatorv1alpha1.PhaseGraduated), out.Step.Message())
		f.expectGraduated(ctx)
		expectSpread(before)
		Expect(policy.Status.Migration.APIServers).To(ConsistOf(servers), policy.Status.Migration.APIServersCheck)
		Expect(reporter.waitedFor(servers[2])).To(BeTrue(), "the plan waited for C, which learned the switch late: %v", reporter.waited)
	})

	It("crdmigrate in a manager that reaches the cluster through the balancer leaves nothing stored in the old version", func(ctx SpecContext) {
		f := newFixture(ctx)
		startOnA()
		mgr, err := envtestutil.StartManager(balanced, env.Scheme, func(m ctrl.Manager) error {
			return crdmigrate.Add(m, crdmigrate.Options{CRDs: []string{f.crd.Name}})
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(mgr.Stop()).To(Succeed()) })
		before := balancer.Connections()
		start := time.Now()
		switchLate(ctx, f.crd.Name)
		Eventually(func() ([]string, error) {
			var crd apiextensionsv1.CustomResourceDefinition
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(f.crd), &crd)
			return crd.Status.StoredVersions, err
		}).WithTimeout(2 * time.Minute).Should(Equal([]string{"v2"}))
		GinkgoWriter.Printf("crdmigrate graduated in %s\n", time.Since(start).Round(time.Millisecond))
		f.expectGraduated(ctx)
		expectSpread(before)
	})

	It("the rehearsal kit, run as the storage switch is applied, leaves nothing stored in the old version", func(ctx SpecContext) {
		f := newFixture(ctx)
		// graduationtest's door, every request through the balancer.
		through := *env.Environment
		through.Config = balanced
		r, err := graduationtest.NewE(&through, graduationtest.Options{Timeout: 2 * time.Minute})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(r.Close)
		r = r.WithT(GinkgoT())
		before := balancer.Connections()
		start := time.Now()
		switchLate(ctx, f.crd.Name)
		startOnA()
		report, err := r.TryGraduate(ctx, f.crd.Name, "v2")
		GinkgoWriter.Printf("the graduation took %s: %s\n", time.Since(start).Round(time.Millisecond), report)
		Expect(err).NotTo(HaveOccurred())
		f.expectGraduated(ctx)
		expectSpread(before)
	})
})
