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

package envtestutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graduator/graduator/graduationtest"
	"github.com/graduator/graduator/internal/sample"
)

// Options say what control plane Start brings up.
type Options struct {
	// OperatorCRDs installs Graduator's own CRDs (config/crd/bases of the
	// module) before Start returns.
	OperatorCRDs bool
	// AddToScheme registers more types in the clients' scheme, after
	// client-go's and apiextensions.k8s.io/v1.
	AddToScheme []func(*runtime.Scheme) error
	// Configure, when set, adjusts the environment before it starts: flags
	// of kube-apiserver, its certificate directory, timeouts.
	Configure func(*envtest.Environment) error
	// Unthrottled turns client-side throttling off in Config (and so in
	// Client and Dynamic): the suite's requests only go to 127.0.0.1.
	Unthrottled bool
}

// Env is a running envtest control plane (kube-apiserver and etcd) with
// admin clients. Start it with Start and end it with Stop.
type Env struct {
	Environment *envtest.Environment
	// Config is the admin's (system:masters).
	Config  *rest.Config
	Scheme  *runtime.Scheme
	Client  client.Client
	Dynamic dynamic.Interface
	// Etcd reads what the API server stored.
	Etcd *graduationtest.EtcdStore
}

// Start starts kube-apiserver and etcd from KUBEBUILDER_ASSETS and connects
// the clients. When it fails, it stops what it started.
func Start(opts Options) (_ *Env, err error) {
	e := &Env{Environment: &envtest.Environment{}, Scheme: runtime.NewScheme()}
	for _, add := range append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme}, opts.AddToScheme...) {
		if err := add(e.Scheme); err != nil {
			return nil, err
		}
	}
	if opts.OperatorCRDs {
		root, err := ModuleRoot()
		if err != nil {
			return nil, err
		}
		e.Environment.CRDDirectoryPaths = []string{filepath.Join(root, "config", "crd", "bases")}
		e.Environment.ErrorIfCRDPathMissing = true
	}
	if opts.Configure != nil {
		if err := opts.Configure(e.Environment); err != nil {
			return nil, err
		}
	}
	// envtest leaves the control plane running when a step after its start
	// fails (installing the CRDs, say): every failure from here stops it.
	defer func() {
		if err != nil {
			err = errors.Join(err, e.Stop())
		}
	}()
	if e.Config, err = e.Environment.Start(); err != nil {
		return nil, fmt.Errorf("start the control plane: %w", err)
	}
	if opts.Unthrottled {
		e.Config.QPS, e.Config.Burst = -1, 0
	}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: e.Scheme}); err != nil {
		return nil, err
	}
	if e.Dynamic, err = dynamic.NewForConfig(e.Config); err != nil {
		return nil, err
	}
	if e.Etcd, err = graduationtest.NewEtcdStore(e.Environment.ControlPlane.Etcd.URL.String()); err != nil {
		return nil, err
	}
	return e, nil
}

// Stop closes the etcd connection and stops kube-apiserver and etcd. It
// tries every step whatever the others return, and may be called again.
func (e *Env) Stop() error {
	var errs []error
	if e.Etcd != nil {
		errs = append(errs, e.Etcd.Close())
		e.Etcd = nil
	}
	if e.Environment != nil {
		errs = append(errs, e.Environment.Stop())
	}
	return errors.Join(errs...)
}

// WriteKubeconfig adds a user to the control plane and writes its
// kubeconfig, for a process of its own (the manager, the CLI), to path.
func (e *Env) WriteKubeconfig(user envtest.User, path string) error {
	u, err := e.Environment.AddUser(user, nil)
	if err != nil {
		return err
	}
	data, err := u.KubeConfig()
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// ModulePath is Graduator's module path, which ModuleRoot looks for.
const ModulePath = sample.ModulePath

// ModuleRoot is the directory of Graduator's go.mod, found from the working
// directory upwards (go test runs a suite in its package's directory).
func ModuleRoot() (string, error) { return sample.ModuleRoot() }
