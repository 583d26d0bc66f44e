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

package robustness_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/graduationtest"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/envtestutil/envsuite"
	"github.com/graduator/graduator/test/pizzaenv"
	"github.com/graduator/graduator/test/robustness"
)

// managerUser is the envtest user the manager process runs as; the audit
// log names it, which is how a run counts the manager's writes.
const managerUser = "graduator-robustness-manager"

var (
	size  = sizeFromEnv()
	seeds = seedsFromEnv()
	// pinnedSpecs: the specs that pin a finding run unless seeds are
	// replayed.
	pinnedSpecs = os.Getenv("ROBUSTNESS_SEED") == "" && os.Getenv("ROBUSTNESS_RUNS") == ""
	// twinRuns: each seed of the quota rig runs a second time without the
	// SIGKILL in its main pass (robustness.WithoutPassKill), to compare a
	// resumed run with the same run uninterrupted (ROBUSTNESS_TWIN=1).
	twinRuns = os.Getenv("ROBUSTNESS_TWIN") == "1" && rig == rigQuota

	testEnv   *envtest.Environment
	k8sClient client.Client
	dyn       dynamic.Interface
	etcd      *graduationtest.EtcdStore
	audit     *envtestutil.AuditLog

	managerBinary     string
	managerKubeconfig string
	webhook           *pizzaenv.Webhook
	// proxy stands between the API server and the webhook, to slow it.
	proxy *envtestutil.SlowProxy
)

// sizes: small runs in `make test`; full is the long target's.
var sizes = map[string]robustness.Size{
	"small": {Name: "small", Objects: 120, MaxFaults: 2},
	"full":  {Name: "full", Objects: 600, MaxFaults: 3},
}

func sizeFromEnv() robustness.Size {
	name := os.Getenv("ROBUSTNESS_SIZE")
	if name == "" {
		name = "small"
	}
	s, ok := sizes[name]
	if !ok {
		panic(fmt.Sprintf("ROBUSTNESS_SIZE=%q: want small or full", name))
	}
	return s
}

// defaultSeeds run in `make test` (the Makefile's ROBUSTNESS_CI_SEEDS):
// seeds of the cover (robustness.Cover) that use every rig once: a SIGKILL
// in the proof and the main pass (2), the storage version set back in the
// settling and the main pass (27), a lagging API server (29, then the
// webhook slow in the main pass), the embedder SIGKILLed (50).
const defaultSeeds = "2,27,29,50"

// seedsFromEnv: ROBUSTNESS_SEED replays seeds (a comma-separated list);
// ROBUSTNESS_RUNS=n runs seeds FIRST..FIRST+n-1 (ROBUSTNESS_FIRST_SEED, 1
// by default); otherwise ROBUSTNESS_SEEDS, or defaultSeeds.
func seedsFromEnv() []uint64 {
	if runs := os.Getenv("ROBUSTNESS_RUNS"); runs != "" && os.Getenv("ROBUSTNESS_SEED") == "" {
		n, err := strconv.Atoi(runs)
		if err != nil || n < 1 {
			panic(fmt.Sprintf("ROBUSTNESS_RUNS=%q: want a count", runs))
		}
		first := uint64(1)
		if f := os.Getenv("ROBUSTNESS_FIRST_SEED"); f != "" {
			v, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				panic(fmt.Sprintf("ROBUSTNESS_FIRST_SEED=%q: %v", f, err))
			}
			first = v
		}
		out := make([]uint64, n)
		for i := range out {
			out[i] = first + uint64(i)
		}
		return out
	}
	list := os.Getenv("ROBUSTNESS_SEED")
	if list == "" {
		list = os.Getenv("ROBUSTNESS_SEEDS")
	}
	if list == "" {
		list = defaultSeeds
	}
	var out []uint64
	for _, f := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' }) {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			panic(fmt.Sprintf("seed %q: %v", f, err))
		}
		out = append(out, v)
	}
	return out
}

func TestRobustness(t *testing.T) {
	envsuite.RunSpecs(t, fmt.Sprintf("Robustness suite (random fault schedules, size %s, %d seeds)", size.Name, len(seeds)))
}

var _ = BeforeSuite(func(ctx SpecContext) {
	// Registered first, so it runs last: once everything stopped, no
	// process this suite started may be left (invariant 6).
	DeferCleanup(expectNoChildren)

	var err error
	if managerBinary = os.Getenv("ROBUSTNESS_MANAGER_BINARY"); managerBinary != "" {
		By("using the manager binary " + managerBinary + " (ROBUSTNESS_MANAGER_BINARY)")
	} else {
		By("building the manager binary, with its failpoints")
		managerBinary, err = gexec.Build("github.com/graduator/graduator/cmd/manager", "-tags", "failpoints")
		Expect(err).NotTo(HaveOccurred())
	}
	// Every process the suite starts inherits the pauses that widen the
	// short stages (robustness.StagePause).
	Expect(os.Setenv("GRADUATOR_FAILPOINTS", robustness.Failpoints())).To(Succeed())

	work, err := os.MkdirTemp("", "graduator-robustness-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() error {
		if os.Getenv("ROBUSTNESS_KEEP") != "" {
			fmt.Printf("kept %s (ROBUSTNESS_KEEP)\n", work)
			return nil
		}
		return os.RemoveAll(work)
	})
	// A certificate directory of our own survives APIServer.Stop(), so a
	// restarted API server keeps its serving certificate.
	certDir := filepath.Join(work, "apiserver")
	Expect(os.Mkdir(certDir, 0o700)).To(Succeed())
	apiServerLog, err := os.Create(filepath.Join(work, "kube-apiserver.log"))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(apiServerLog.Close)

	env := envsuite.Start(envtestutil.Options{
		OperatorCRDs: true,
		AddToScheme:  []func(*runtime.Scheme) error{graduatorv1alpha1.AddToScheme, pizzaenv.AddToScheme},
		Unthrottled:  true,
		Configure: func(env *envtest.Environment) error {
			env.ControlPlaneStopTimeout = 2 * time.Minute
			apiServer := env.ControlPlane.GetAPIServer()
			apiServer.CertDir = certDir
			apiServer.StartTimeout = time.Minute
			apiServer.Out, apiServer.Err = apiServerLog, apiServerLog
			// Without it the API server waits 60 s for open watches when it
			// stops.
			apiServer.Configure().Set("shutdown-watch-termination-grace-period", "5s")
			configureRig(env)
			audit, err = envtestutil.EnableAuditLog(env, work)
			return err
		},
	})
	testEnv, k8sClient, dyn, etcd = env.Environment, env.Client, env.Dynamic, env.Etcd

	managerKubeconfig = filepath.Join(work, "manager.kubeconfig")
	Expect(env.WriteKubeconfig(envtest.User{Name: managerUser, Groups: []string{"system:masters"}}, managerKubeconfig)).To(Succeed())

	By("starting the Pizza conversion webhook behind a proxy that can slow it")
	webhook, err = pizzaenv.StartWebhook(ctx)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(webhook.Stop)
	proxy, err = envtestutil.StartSlowProxy(webhookAddr())
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(proxy.Close)
}, NodeTimeout(10*time.Minute))

var _ = ReportAfterSuite("robustness summary", func(report Report) {
	writeSummary(report)
})
