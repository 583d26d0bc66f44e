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

package migration_test

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"

	"github.com/graduator/graduator/migration"
)

var _ = Describe("The catch-up sweep", func() {
	It("lists again when its watch breaks and cannot resume, and catches what others wrote in the old version meanwhile", func(ctx SpecContext) {
		const n = 400
		f := newFixture(ctx, n)
		f.switchStorage(ctx)
		var breaker watchBreaker
		var late map[string]bool
		var once sync.Once
		result, err := migration.Run(ctx, dyn, migration.Options{
			Resource: f.v2, PageSize: 50, Concurrency: 2, Config: breaker.config(cfg),
			OnProgress: func(migration.Progress) {
				once.Do(func() {
					// The watch's connection drops and stays down while an
					// API server that still takes v1 for the storage version
					// writes objects of later pages, and etcd compacts past
					// them: the watch cannot resume where it was (410 Gone).
					breaker.hold()
					breaker.cut()
					late = f.writeInOldVersion(ctx, 361, 400)
					resp, err := etcd.Client().Get(ctx, "compact-probe")
					Expect(err).NotTo(HaveOccurred())
					_, err = etcd.Client().Compact(ctx, resp.Header.Revision)
					Expect(err).NotTo(HaveOccurred())
					breaker.release()
				})
			},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(result.Complete).To(BeTrue())
		Expect(result.Failed).To(BeZero())
		Expect(late).To(HaveLen(20))
		Expect(breaker.watches.Load()).To(BeNumerically(">=", 2), "the watch was cut and tried to resume")

		Expect(f.storedCounts(ctx)).To(Equal(map[string]int{f.group + "/v2": n}), "etcd holds every object at v2")
		Expect(result.CaughtUp).To(BeNumerically(">=", len(late)), "the LIST found the objects written while the watch was down")
		Expect(result.SweepMode).To(Equal(migration.SweepList), result.SweepReason)
		Expect(result.SweepReason).To(ContainSubstring("410 Gone"))
	})
})

// watchBreaker stands between the engine and the API server: it can cut
// the engine's watch streams and hold its new ones back.
type watchBreaker struct {
	mu      sync.Mutex
	bodies  []*cutBody
	gate    chan struct{} // closed while watches may connect; nil: open
	watches atomic.Int32
}

func (b *watchBreaker) config(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.URL.Query().Get("watch") != "true" {
				return rt.RoundTrip(req)
			}
			b.watches.Add(1)
			b.mu.Lock()
			gate := b.gate
			b.mu.Unlock()
			if gate != nil {
				select {
				case <-gate:
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
			}
			resp, err := rt.RoundTrip(req)
			if err != nil {
				return resp, err
			}
			body := &cutBody{ReadCloser: resp.Body}
			b.mu.Lock()
			b.bodies = append(b.bodies, body)
			b.mu.Unlock()
			resp.Body = body
			return resp, nil
		})
	})
	return c
}

// hold makes new watches wait until release.
func (b *watchBreaker) hold() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gate = make(chan struct{})
}

func (b *watchBreaker) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.gate)
	b.gate = nil
}

// cut ends every watch stream open, as a dropped connection does.
func (b *watchBreaker) cut() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, body := range b.bodies {
		body.cut.Store(true)
		_ = body.Close()
	}
	b.bodies = nil
}

// cutBody reads as ended once cut.
type cutBody struct {
	io.ReadCloser
	cut atomic.Bool
}

func (c *cutBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if c.cut.Load() {
		return 0, io.EOF
	}
	return n, err
}
