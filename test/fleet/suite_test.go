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

// Package fleet_test runs `graduator status` and `graduator scan` across
// many kube contexts: three envtest control planes in one kubeconfig (one
// of them stopped) and a fourth context whose server never answers. Each
// live plane holds planted states; the CLI runs as a user bound to the
// scan's shipped ClusterRole (config/scan/role.yaml) and nothing else, and
// the API servers' audit logs show it wrote nothing. `graduator prepare`
// runs on three control planes of its own (prepare_test.go).
package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/envtestutil/envsuite"
)

// scanner is the user the CLI runs as: bound to the graduator-scan
// ClusterRole only.
const scanner = "fleet-scanner"

// plane is one control plane of the fleet.
type plane struct {
	name  string
	env   *envtestutil.Env
	audit *envtestutil.AuditLog
}

var (
	planes []*plane // plane-a, plane-b (both live) and plane-c (stopped)
	// kubeconfig holds a context per plane and "hung", whose server accepts
	// connections and never answers.
	kubeconfig string
	// narrow is a second kubeconfig file: plane-a as a user who may only
	// list CRDs (KUBECONFIG lists both files).
	narrow string
	binary string
)

func TestFleet(t *testing.T) {
	envsuite.RunSpecs(t, "Fleet suite: status and scan across contexts (envtest)")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(), "KUBEBUILDER_ASSETS must point at kube-apiserver and etcd")
	dir := GinkgoT().TempDir()
	names := []string{"plane-a", "plane-b", "plane-c"}
	planes = make([]*plane, len(names))
	errs := make([]error, len(names)+1)
	var wg sync.WaitGroup
	for i, name := range names {
		planes[i] = &plane{name: name}
		wg.Go(func() { errs[i] = startPlane(planes[i], filepath.Join(dir, name)) })
	}
	wg.Go(func() { binary, errs[len(names)] = gexec.Build("github.com/graduator/graduator/cmd/graduator") })
	wg.Wait()
	DeferCleanup(func() error {
		gexec.KillAndWait()
		gexec.CleanupBuildArtifacts()
		var stops []error
		for _, p := range planes {
			if p.env != nil {
				stops = append(stops, p.env.Stop())
			}
		}
		return errors.Join(stops...)
	})
	Expect(errors.Join(errs...)).NotTo(HaveOccurred())

	hung, err := net.Listen("tcp", "127.0.0.1:0") // never accepts: TLS handshakes hang
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(hung.Close)

	config := clientcmdapi.NewConfig()
	for _, p := range planes {
		grantScan(ctx, p)
		Expect(addContext(config, p.name, p.env, envtest.User{Name: scanner})).To(Succeed())
	}
	config.Clusters["hung"] = &clientcmdapi.Cluster{Server: "https://" + hung.Addr().String(), InsecureSkipTLSVerify: true}
	config.AuthInfos["hung"] = &clientcmdapi.AuthInfo{Token: "none"}
	config.Contexts["hung"] = &clientcmdapi.Context{Cluster: "hung", AuthInfo: "hung"}
	config.CurrentContext = "plane-a"
	kubeconfig = filepath.Join(dir, "kubeconfig")
	Expect(clientcmd.WriteToFile(*config, kubeconfig)).To(Succeed())

	narrowConfig := clientcmdapi.NewConfig()
	Expect(addContext(narrowConfig, "plane-a-narrow", planes[0].env, envtest.User{Name: "crd-reader"})).To(Succeed())
	narrow = filepath.Join(dir, "narrow")
	Expect(clientcmd.WriteToFile(*narrowConfig, narrow)).To(Succeed())
	bind(ctx, planes[0], "crd-reader", []rbacv1.PolicyRule{{APIGroups: []string{"apiextensions.k8s.io"},
		Resources: []string{"customresourcedefinitions"}, Verbs: []string{"list"}}})

	plantA(ctx, planes[0].env)
	plantB(ctx, planes[1].env)
	plantCommon(ctx, planes[2].env)
	By("plane-c stops")
	Expect(planes[2].env.Stop()).To(Succeed())
	planes[2].env = nil
})

// startPlane starts a control plane that logs every write, with
// Graduator's CRDs on plane-b only (plane-a has no policy API).
func startPlane(p *plane, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	env, err := envtestutil.Start(envtestutil.Options{
		OperatorCRDs: p.name == "plane-b",
		AddToScheme:  []func(*runtime.Scheme) error{graduatorv1alpha1.AddToScheme},
		Unthrottled:  true,
		Configure: func(e *envtest.Environment) (err error) {
			p.audit, err = envtestutil.EnableWriteAuditLog(e, dir)
			return err
		},
	})
	p.env = env
	return err
}

// grantScan binds the scanner to the ClusterRole the project ships.
func grantScan(ctx context.Context, p *plane) {
	root, err := envtestutil.ModuleRoot()
	Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(filepath.Join(root, "config", "scan", "role.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var role rbacv1.ClusterRole
	Expect(yaml.UnmarshalStrict(data, &role)).To(Succeed())
	bind(ctx, p, scanner, role.Rules)
}

// bind gives user a ClusterRole of rules.
func bind(ctx context.Context, p *plane, user string, rules []rbacv1.PolicyRule) {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}
	Expect(p.env.Client.Create(ctx, role)).To(Succeed())
	Expect(p.env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	})).To(Succeed())
}

// addContext adds user's credentials on env to config as a context, cluster
// and user all named name.
func addContext(config *clientcmdapi.Config, name string, env *envtestutil.Env, user envtest.User) error {
	u, err := env.Environment.AddUser(user, nil)
	if err != nil {
		return err
	}
	data, err := u.KubeConfig()
	if err != nil {
		return err
	}
	own, err := clientcmd.Load(data)
	if err != nil {
		return err
	}
	ctx := own.Contexts[own.CurrentContext]
	if ctx == nil {
		return fmt.Errorf("the kubeconfig of %s on %s has no current context", user.Name, name)
	}
	config.Clusters[name] = own.Clusters[ctx.Cluster]
	config.AuthInfos[name] = own.AuthInfos[ctx.AuthInfo]
	config.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	return nil
}
