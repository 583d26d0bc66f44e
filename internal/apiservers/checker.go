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

package apiservers

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	apidiscovery "k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// The Service every API server of a cluster is an endpoint of.
const (
	serviceNamespace = metav1.NamespaceDefault
	serviceName      = "kubernetes"
)

// DefaultTimeout bounds one server's answer, and dialTimeout its
// connection: a private address dialled from outside its network drops the
// packets, and a healthy server answers discovery in milliseconds.
const (
	DefaultTimeout = 3 * time.Second
	dialTimeout    = time.Second
)

// unreachableFor is how long a server that could not be reached is not
// dialled again: the checks of one run (before the pass, before the prune,
// every poll while a server is behind) then cost nothing for it, and a
// server back from a restart is dialled again soon enough.
const unreachableFor = 5 * time.Minute

// frontDoorInFlight bounds the answers asked through the front door at once.
const frontDoorInFlight = 8

// Resource is what the servers are asked about: a CRD's resource and the
// storage version it should be written in.
type Resource struct {
	Group, Version, Kind, Plural string
}

// Checker asks every API server of the cluster its Config reaches: each one
// at its own address where it can be dialled, and through the Config's own
// address (the front door, a balancer) where it cannot. Use one Checker for
// the checks of a run: it remembers the servers it could not reach.
type Checker struct {
	// Config is the caller's: its credentials and CA reach each server.
	Config *rest.Config
	// Timeout bounds each server's answer; DefaultTimeout when 0.
	Timeout time.Duration
	// Clock tells when an unreachable server may be dialled again; a real
	// clock when nil.
	Clock clock.PassiveClock

	mu          sync.Mutex
	unreachable map[string]unreachable
}

// unreachable is a server that could not be dialled, and since when.
type unreachable struct {
	err   error
	since time.Time
}

// Check asks every API server which storage version hash it serves for r.
// It never fails: what it could not do is an Unchecked verdict that says
// why.
func (c *Checker) Check(ctx context.Context, r Resource) Verdict {
	want := apidiscovery.StorageVersionHash(r.Group, r.Version, r.Kind)
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return Judge(want, nil, err, nil)
	}
	// The reads are bounded as each server's answer is: through a balancer
	// one may land on a server that cannot answer now, and the check is
	// then taken again (a read that may pass) rather than stalled.
	readCtx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	servers, listErr := Addresses(readCtx, cs)
	count := Count{Listed: len(servers), ListErr: listErr}
	count.Leases, count.LeasesErr = identityLeases(readCtx, cs, c.clock().Now())
	direct := Verdict{State: Unchecked}
	if !count.one() {
		direct = Judge(want, servers, listErr, c.askEach(ctx, servers, r))
		if direct.State != Unchecked {
			return direct
		}
	}
	n, _ := count.Servers()
	return JudgeFrontDoor(want, direct, count, c.askFrontDoor(ctx, r, AnswersFor(n, MissedAtMost)))
}

// askEach asks each server at its own address, in parallel, but for those
// found unreachable lately.
func (c *Checker) askEach(ctx context.Context, servers []string, r Resource) []Answer {
	answers := make([]Answer, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		if err := c.knownUnreachable(s); err != nil {
			answers[i] = Answer{Server: s, Err: err}
			continue
		}
		wg.Go(func() {
			answers[i] = c.ask(ctx, s, r)
			if unreachableErr(answers[i].Err) {
				c.remember(s, answers[i].Err)
			}
		})
	}
	wg.Wait()
	return answers
}

// askFrontDoor asks the Config's own address k times, each on a fresh
// connection: an L4 balancer in front of the servers spreads connections,
// not requests, so only fresh ones reach every server.
func (c *Checker) askFrontDoor(ctx context.Context, r Resource, k int) []Answer {
	answers := make([]Answer, k)
	var g errgroup.Group
	g.SetLimit(frontDoorInFlight)
	for i := range answers {
		g.Go(func() error {
			cfg := rest.CopyConfig(c.Config)
			answers[i].Server = cfg.Host
			answers[i].Hash, answers[i].Peer, answers[i].Err = c.askAt(ctx, cfg, r)
			return nil
		})
	}
	_ = g.Wait()
	return answers
}

func (c *Checker) knownUnreachable(addr string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	u, ok := c.unreachable[addr]
	if !ok || c.clock().Since(u.since) > unreachableFor {
		return nil
	}
	return fmt.Errorf("%w (found %s ago; not dialled again for %s)", u.err,
		c.clock().Since(u.since).Round(time.Second), unreachableFor)
}

func (c *Checker) remember(addr string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unreachable == nil {
		c.unreachable = map[string]unreachable{}
	}
	c.unreachable[addr] = unreachable{err: err, since: c.clock().Now()}
}

func (c *Checker) timeout() time.Duration {
	if c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

func (c *Checker) clock() clock.PassiveClock {
	if c.Clock == nil {
		return clock.RealClock{}
	}
	return c.Clock
}

// unreachableErr tells a server that could not be reached (refused, timed
// out, reset) from one that answered with an error of its own.
func unreachableErr(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	var wrongName x509.HostnameError
	var unknownCA x509.UnknownAuthorityError
	return !errors.As(err, &status) && !errors.As(err, &wrongName) && !errors.As(err, &unknownCA)
}

// Addresses lists the API servers (host:port) from the kubernetes
// EndpointSlice in default, or from the kubernetes Endpoints when the slice
// cannot be read. Each API server's endpoint reconciler writes both, under
// that name: one slice, every server at the port they share. Only ready
// endpoints count: one not ready takes no request through the Service.
func Addresses(ctx context.Context, cs kubernetes.Interface) ([]string, error) {
	slice, sliceErr := cs.DiscoveryV1().EndpointSlices(serviceNamespace).Get(ctx, serviceName, metav1.GetOptions{})
	switch {
	case sliceErr == nil:
		return sliceAddresses(slice), nil
	case !apierrors.IsForbidden(sliceErr) && !apierrors.IsNotFound(sliceErr):
		return nil, notNow{fmt.Errorf("read the %s EndpointSlice in %s: %w", serviceName, serviceNamespace, sliceErr)}
	}
	endpoints, err := cs.CoreV1().Endpoints(serviceNamespace).Get(ctx, serviceName, metav1.GetOptions{}) //nolint:staticcheck // the fallback where the slice cannot be read
	if err != nil {
		return nil, fmt.Errorf("read the %s EndpointSlice in %s: %w; the Endpoints: %w", serviceName, serviceNamespace,
			reason(sliceErr), reason(err))
	}
	return endpointsAddresses(endpoints), nil
}

// notNow is a read that failed for a reason that may pass (a timeout, a
// server busy or restarting): the servers are neither known to agree nor
// beyond counting, so the check is taken again rather than left to the
// clock.
type notNow struct{ err error }

func (e notNow) Error() string { return e.err.Error() }
func (e notNow) Unwrap() error { return e.err }

// identityLeases counts the live kube-apiserver identity Leases in
// kube-system: each API server renews its own (every 10 s, for an hour), so
// they count the servers behind a balancer whose addresses cannot be
// dialled. A Lease whose holder stopped renewing it is not counted once it
// expires.
func identityLeases(ctx context.Context, cs kubernetes.Interface, now time.Time) (int, error) {
	leases, err := cs.CoordinationV1().Leases(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{
		LabelSelector: identityLabel + "=kube-apiserver"})
	if apierrors.IsForbidden(err) {
		return 0, errLeasesForbidden
	}
	if err != nil {
		return 0, fmt.Errorf("list the identity Leases in kube-system: %w", err)
	}
	n := 0
	for _, l := range leases.Items {
		if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil ||
			l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second).After(now) {
			n++
		}
	}
	return n, nil
}

var errLeasesForbidden = errors.New("forbidden (counting them takes list on leases in kube-system)")

// identityLabel marks the Leases by which each API server tells it is alive
// (the APIServerIdentity feature, on by default since Kubernetes 1.26).
const identityLabel = "apiserver.kubernetes.io/identity"

// reason shortens an API error to what a person acts on.
func reason(err error) error {
	if apierrors.IsForbidden(err) {
		return errors.New("forbidden (reading them takes get on the EndpointSlice and Endpoints named kubernetes in default)")
	}
	return err
}

func sliceAddresses(s *discoveryv1.EndpointSlice) []string {
	var out []string
	for _, p := range s.Ports {
		if p.Port == nil || (p.Name != nil && *p.Name != "https" && len(s.Ports) > 1) {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				out = appendNew(out, net.JoinHostPort(a, strconv.Itoa(int(*p.Port))))
			}
		}
	}
	return out
}

//nolint:staticcheck // the fallback where the slice cannot be read
func endpointsAddresses(e *corev1.Endpoints) []string {
	var out []string
	for _, sub := range e.Subsets {
		for _, p := range sub.Ports {
			if p.Name != "https" && len(sub.Ports) > 1 {
				continue
			}
			for _, a := range sub.Addresses {
				out = appendNew(out, net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	return out
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// ask asks the server at addr for r's discovery, with the caller's
// credentials and CA. Its certificate is checked for the name the caller's
// config reaches the cluster by (what an API server's certificate names: the
// balancer's name, kubernetes.default), and, when it does not name that, for
// the address itself (kubeadm's names the advertise address too).
func (c *Checker) ask(ctx context.Context, addr string, r Resource) Answer {
	cfg := rest.CopyConfig(c.Config)
	cfg.Host, cfg.APIPath, cfg.ServerName = "https://"+addr, "", serverName(c.Config)
	hash, _, err := c.askAt(ctx, cfg, r)
	var wrongName x509.HostnameError
	if errors.As(err, &wrongName) {
		cfg.ServerName = ""
		hash, _, err = c.askAt(ctx, cfg, r)
	}
	return Answer{Server: addr, Hash: hash, Err: err}
}

// askAt asks cfg's host for r's discovery on a connection of its own, and
// returns the hash it serves and the fingerprint of its certificate.
func (c *Checker) askAt(ctx context.Context, cfg *rest.Config, r Resource) (hash, peer string, err error) {
	cfg.Timeout = c.timeout()
	// A Proxy of its own keeps the transport out of client-go's cache (a
	// fresh connection each time), and the dialer bounds the connection.
	if cfg.Proxy == nil {
		cfg.Proxy = utilnet.NewProxierWithNoProxyCIDR(http.ProxyFromEnvironment)
	}
	cfg.Dial = (&net.Dialer{Timeout: dialTimeout}).DialContext
	var mu sync.Mutex
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return peerRecorder{next: rt, seen: func(p string) { mu.Lock(); peer = p; mu.Unlock() }}
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return "", "", err
	}
	defer httpClient.CloseIdleConnections()
	disco, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return "", "", err
	}
	resources, err := disco.ServerResourcesForGroupVersionWithContext(ctx, r.Group+"/"+r.Version)
	mu.Lock()
	defer mu.Unlock()
	switch {
	case apierrors.IsNotFound(err):
		return "", peer, nil
	case err != nil:
		return "", peer, err
	}
	for _, res := range resources.APIResources {
		if res.Name == r.Plural {
			return res.StorageVersionHash, peer, nil
		}
	}
	return "", peer, nil
}

// peerRecorder tells the fingerprint of the certificate each answer came
// with: servers behind one balancer with certificates of their own are told
// apart by it.
type peerRecorder struct {
	next http.RoundTripper
	seen func(string)
}

func (p peerRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := p.next.RoundTrip(req)
	if err == nil && resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		sum := sha256.Sum256(resp.TLS.PeerCertificates[0].Raw)
		p.seen(hex.EncodeToString(sum[:8]))
	}
	return resp, err
}

// serverName is the TLS name the config checks: its own ServerName, or its
// host's name.
func serverName(cfg *rest.Config) string {
	if cfg.ServerName != "" {
		return cfg.ServerName
	}
	host := cfg.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	u, err := url.Parse(host)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
