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

package graduation_test

import (
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/test/envtestutil"
)

// operatorOptions say who the operator is and what its requests meet.
type operatorOptions struct {
	// config is the identity; the suite's admin when nil.
	config *rest.Config
	// fault, when set, answers a request instead of the API server when it
	// returns a response.
	fault func(*http.Request) *http.Response
}

// startOperatorWith runs the manager as the binary would (controllers.Setup),
// until stop or the end of the spec, whatever its outcome, recording every
// request it sends.
func startOperatorWith(opts operatorOptions) *operator {
	base := opts.config
	if base == nil {
		base = cfg
	}
	requests := &requestLog{}
	opCfg := rest.CopyConfig(base)
	opCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			requests.add(req)
			if opts.fault != nil {
				if resp := opts.fault(req); resp != nil {
					return resp, nil
				}
			}
			return rt.RoundTrip(req)
		})
	}
	mgr, err := envtestutil.StartOperator(opCfg, scheme)
	Expect(err).NotTo(HaveOccurred())
	op := &operator{stopManager: mgr.Stop, requests: requests}
	DeferCleanup(op.stop)
	return op
}

// requestLog records the operator's requests: method, path, query and when.
type requestLog struct {
	mu    sync.Mutex
	calls []request
}

type request struct {
	method, path, continueToken string
	dryRun, limit               bool
	at                          time.Time
}

func (l *requestLog) add(req *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, request{
		method: req.Method, path: req.URL.Path, continueToken: req.URL.Query().Get("continue"),
		dryRun: req.URL.Query().Has("dryRun"), limit: req.URL.Query().Has("limit"), at: time.Now(),
	})
}

// writes returns the PATCH requests, dry runs excluded, to objects of the
// resource (any version), sent after since.
func (l *requestLog) writes(plural string, since time.Time) []request {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []request
	for _, c := range l.calls {
		if c.method == http.MethodPatch && !c.dryRun && strings.Contains(c.path, "/"+plural+"/") && !c.at.Before(since) {
			out = append(out, c)
		}
	}
	return out
}

// lists returns the paged LIST requests of the resource, in order.
func (l *requestLog) lists(plural string) []request {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []request
	for _, c := range l.calls {
		if c.method == http.MethodGet && c.limit && strings.HasSuffix(c.path, "/"+plural) {
			out = append(out, c)
		}
	}
	return out
}

// slowPolicy stores version in the CRD at 40 writes/s by 2 writers, slow
// enough for a spec to act while the run is part way.
func slowPolicy(crdName, version string, pageSize int64) *graduatorv1alpha1.CRDVersionPolicy {
	return &graduatorv1alpha1.CRDVersionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: crdName},
		Spec: graduatorv1alpha1.CRDVersionPolicySpec{
			StorageVersion: version,
			Migration: graduatorv1alpha1.MigrationSettings{
				Concurrency: 2, PageSize: pageSize, QPS: 40, SettleDelay: &metav1.Duration{Duration: time.Second},
			},
		},
	}
}

// waitForWrites waits until the operator sent at least n writes of the
// resource.
func waitForWrites(op *operator, plural string, n int) {
	EventuallyWithOffset(1, func() int { return len(op.requests.writes(plural, time.Time{})) }).
		WithTimeout(time.Minute).WithPolling(50 * time.Millisecond).Should(BeNumerically(">=", n))
}
