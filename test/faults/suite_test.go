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

package faults_test

import (
	"fmt"
	"os"
	"path/filepath"
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
)

// managerUser is the envtest user the manager process runs as; the audit log
// names it, which is how the pause scenario counts the manager's writes.
const managerUser = "graduator-faults-manager"

// pauseGroup is the API group of the pause scenario's widgets: the only one
// the API server audits, so the audit log stays small.
const pauseGroup = "pause.faults.graduator.io"

var (
	size = sizeFromEnv()

	testEnv *envtest.Environment
	// k8sClient and dyn talk to the API server as the envtest admin, without
	// client-side throttling.
	k8sClient client.Client
	dyn       dynamic.Interface
	etcd      *graduationtest.EtcdStore

	// managerBinary is cmd/manager built by gexec; managerKubeconfig a
	// kubeconfig of managerUser (system:masters).
	managerBinary     string
	managerKubeconfig string
	// auditLog is the API server's audit log (JSON lines).
	auditLog string
	// webhook is the sample Pizza conversion webhook.
	webhook *pizzaenv.Webhook
	// apiServerBroken is set when envtest could not restart the API server:
	// the specs after it skip.
	apiServerBroken string
)

func TestFaults(t *testing.T) {
	envsuite.RunSpecs(t, fmt.Sprintf("Fault suite (operator process on envtest, size %s)", size.name))
}

var _ = BeforeSuite(func(ctx SpecContext) {
	var err error
	if managerBinary = os.Getenv("FAULTS_MANAGER_BINARY"); managerBinary != "" {
		By("using the manager binary " + managerBinary + " (FAULTS_MANAGER_BINARY)")
	} else {
		By("building the manager binary")
		managerBinary, err = gexec.Build("github.com/graduator/graduator/cmd/manager")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(gexec.CleanupBuildArtifacts)
	}

	By("starting kube-apiserver and etcd with an audit log of PATCHes to " + pauseGroup)
	// A certificate directory of our own survives APIServer.Stop(), so a
	// restarted API server keeps its serving certificate and every client
	// (the manager's kubeconfig included) keeps trusting it.
	work, err := os.MkdirTemp("", "graduator-faults-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() error {
		if os.Getenv("FAULTS_KEEP") != "" {
			fmt.Printf("kept %s (FAULTS_KEEP)\n", work)
			return nil
		}
		return os.RemoveAll(work)
	})
	certDir := filepath.Join(work, "apiserver")
	Expect(os.Mkdir(certDir, 0o700)).To(Succeed())
	auditLog = filepath.Join(work, "audit.log")
	auditPolicy := filepath.Join(work, "audit-policy.yaml")
	Expect(os.WriteFile(auditPolicy, []byte(fmt.Sprintf(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["patch", "update"]
  resources:
  - group: %q
- level: None
`, pauseGroup)), 0o600)).To(Succeed())
	apiServerLog, err := os.Create(filepath.Join(work, "kube-apiserver.log"))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(apiServerLog.Close)

	// Every process this suite started stops when it ends, failures
	// included: the control plane and the managers through envsuite, the
	// webhook through its DeferCleanup below.
	env := envsuite.Start(envtestutil.Options{
		OperatorCRDs: true,
		AddToScheme:  []func(*runtime.Scheme) error{graduatorv1alpha1.AddToScheme, pizzaenv.AddToScheme},
		// The suite's own requests only go to 127.0.0.1 and every loop is
		// bounded; client-side throttling would only distort the timings.
		Unthrottled: true,
		Configure: func(env *envtest.Environment) error {
			// A graceful stop of kube-apiserver can take longer than envtest's 20 s.
			env.ControlPlaneStopTimeout = 2 * time.Minute
			apiServer := env.ControlPlane.GetAPIServer()
			apiServer.CertDir = certDir
			apiServer.StartTimeout = time.Minute
			apiServer.Out, apiServer.Err = apiServerLog, apiServerLog
			apiServer.Configure().
				Set("audit-log-path", auditLog).
				Set("audit-policy-file", auditPolicy).
				Set("audit-log-mode", "blocking").
				// Without it the API server waits 60 s for open watches when it
				// stops; a real one drains them the same way.
				Set("shutdown-watch-termination-grace-period", "5s")
			return nil
		},
	})
	testEnv, k8sClient, dyn, etcd = env.Environment, env.Client, env.Dynamic, env.Etcd

	managerKubeconfig = filepath.Join(work, "manager.kubeconfig")
	Expect(env.WriteKubeconfig(envtest.User{Name: managerUser, Groups: []string{"system:masters"}}, managerKubeconfig)).To(Succeed())

	By("starting the Pizza conversion webhook")
	webhook, err = pizzaenv.StartWebhook(ctx)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(webhook.Stop)
}, NodeTimeout(10*time.Minute))

var _ = ReportAfterSuite("fault figures", func(report Report) {
	writeFigures(report)
})
