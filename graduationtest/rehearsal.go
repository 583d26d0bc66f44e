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

package graduationtest

import (
	"errors"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graduator/graduator/internal/driver"
	"github.com/graduator/graduator/migration"
)

// TB is the part of a test a rehearsal reports to. *testing.T, *testing.B
// and Ginkgo's GinkgoT() implement it. When it also has Cleanup (as all
// three do), New registers Close there.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// DefaultTimeout bounds each wait of a rehearsal (a CRD served, the storage
// switch seen by discovery).
const DefaultTimeout = 30 * time.Second

// Options configure a Rehearsal.
type Options struct {
	// Scheme decodes the typed objects given to Create; client-go's types
	// and apiextensions.k8s.io/v1 when nil. Unstructured objects need none.
	Scheme *runtime.Scheme
	// Timeout overrides DefaultTimeout.
	Timeout time.Duration
	// Ignore lists JSON pointers (RFC 6901, such as "/status" or
	// "/metadata/annotations/example.com~1cache") of fields Verify does not
	// compare, with everything under them: fields a conversion legitimately
	// adds or changes, such as an empty status that a typed round trip
	// writes out.
	Ignore []string
	// AcceptLoss lists field paths (such as /status/conditions) the
	// conversion may lose; the round-trip proof that Graduate runs before
	// the first write refuses any other loss.
	AcceptLoss []string
	// Migration tunes the engine Graduate runs, and goes to it as it is
	// (its callbacks too); the rehearsal sets the Resource, the Config and
	// the progress to resume. WriteTo is also what the preflight checks. An
	// EtcdQuota of 0 is read from the environment's etcd.
	Migration migration.Options
}

// Rehearsal is a CRD upgrade rehearsed against one envtest control plane.
// Create it with New; its methods may be called from one goroutine at a
// time.
type Rehearsal struct {
	// Config, Client and Dynamic are the environment's admin clients.
	Config  *rest.Config
	Client  client.Client
	Dynamic dynamic.Interface
	// Etcd reads what the API server stored.
	Etcd *EtcdStore

	t    TB
	opts Options
	// clients are the driver's, from Config.
	clients driver.Clients
}

// New connects a rehearsal to a started envtest environment: to its API
// server as the environment's admin, and to its etcd. It fails t when it
// cannot.
func New(t TB, env *envtest.Environment, opts Options) *Rehearsal {
	t.Helper()
	r, err := NewE(env, opts)
	if err != nil {
		t.Fatalf("graduationtest: %v", err)
		return nil
	}
	r.t = t
	if c, ok := t.(interface{ Cleanup(func()) }); ok {
		c.Cleanup(func() { _ = r.Close() })
	}
	return r
}

// NewE is New returning an error; its Rehearsal reports to no test until
// WithT gives it one.
func NewE(env *envtest.Environment, opts Options) (*Rehearsal, error) {
	if env == nil || env.Config == nil || env.ControlPlane.Etcd == nil || env.ControlPlane.Etcd.URL == nil {
		return nil, errors.New("the envtest environment is not started (call Start first)")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Scheme == nil {
		opts.Scheme = runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(opts.Scheme); err != nil {
			return nil, err
		}
		if err := apiextensionsv1.AddToScheme(opts.Scheme); err != nil {
			return nil, err
		}
	}
	r := &Rehearsal{Config: env.Config, opts: opts}
	var err error
	if r.Client, err = client.New(env.Config, client.Options{Scheme: opts.Scheme}); err != nil {
		return nil, fmt.Errorf("create the client: %w", err)
	}
	if r.clients, err = driver.ClientsFor(env.Config, r.Client, r.Client); err != nil {
		return nil, err
	}
	r.Dynamic = r.clients.Dynamic
	if r.Etcd, err = NewEtcdStore(env.ControlPlane.Etcd.URL.String()); err != nil {
		return nil, err
	}
	return r, nil
}

// WithT returns a copy of the rehearsal that reports to t: one per spec
// when the rehearsal is shared by a suite.
func (r *Rehearsal) WithT(t TB) *Rehearsal {
	c := *r
	c.t = t
	return &c
}

// Close closes the etcd connection. The control plane is the caller's.
func (r *Rehearsal) Close() error {
	if r.Etcd == nil {
		return nil
	}
	return r.Etcd.Close()
}

// helper marks the caller as a helper of the test, when there is one.
func (r *Rehearsal) helper() {
	if r.t != nil {
		r.t.Helper()
	}
}

// fatal fails the test with err, which the Try forms return.
func (r *Rehearsal) fatal(err error) {
	if err == nil {
		return
	}
	if r.t == nil {
		panic(fmt.Sprintf("graduationtest: %v (the Rehearsal has no TB: use New or WithT)", err))
	}
	r.t.Helper()
	r.t.Fatalf("%v", err)
}
