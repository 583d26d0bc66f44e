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
	"net/http"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// ListRecorder records the paged LIST requests of API-group resources (GETs
// under /apis/ with a limit, which is how custom resources are listed page
// by page) that a client sends, in order. Its zero value is ready to use.
type ListRecorder struct {
	mu    sync.Mutex
	calls []ListCall
}

// ListCall is one recorded LIST.
type ListCall struct {
	// Path is the URL path, such as /apis/example.com/v1/widgets.
	Path string
	// Continue is the continue token sent; empty for a first page.
	Continue string
	// Exact: a read at exactly a resourceVersion (resourceVersionMatch
	// Exact), as the engine asks whether etcd compacted past a revision,
	// not a page of the population.
	Exact bool
}

// Config returns a copy of cfg whose clients report to the recorder.
func (l *ListRecorder) Config(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(l.Wrap)
	return c
}

// Wrap wraps a transport so that its LISTs are recorded; it fits
// rest.Config.WrapTransport.
func (l *ListRecorder) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodGet && strings.HasPrefix(req.URL.Path, "/apis/") && req.URL.Query().Has("limit") {
			l.mu.Lock()
			q := req.URL.Query()
			l.calls = append(l.calls, ListCall{Path: req.URL.Path, Continue: q.Get("continue"),
				Exact: q.Get("resourceVersionMatch") == string(metav1.ResourceVersionMatchExact)})
			l.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// Of returns the recorded LISTs of the resource with this plural (in any
// group, version and namespace).
func (l *ListRecorder) Of(plural string) []ListCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []ListCall
	for _, c := range l.calls {
		if strings.HasSuffix(c.Path, "/"+plural) {
			out = append(out, c)
		}
	}
	return out
}

// ContinueTokens returns the continue tokens of the recorded LISTs of the
// resource with this plural.
func (l *ListRecorder) ContinueTokens(plural string) []string {
	calls := l.Of(plural)
	out := make([]string, 0, len(calls))
	for _, c := range calls {
		out = append(out, c.Continue)
	}
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
