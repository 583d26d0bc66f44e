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
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apidiscovery "k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The Service every API server of a cluster is an endpoint of.
const (
	serviceNamespace = metav1.NamespaceDefault
	serviceName      = "kubernetes"
)

// DefaultTimeout bounds one server's answer.
const DefaultTimeout = 5 * time.Second

// Resource is what the servers are asked about: a CRD's resource and the
// storage version it should be written in.
type Resource struct {
	Group, Version, Kind, Plural string
}

// Checker asks every API server of the cluster its Config reaches.
type Checker struct {
	// Config is the caller's: its credentials and CA reach each server.
	Config *rest.Config
	// Timeout bounds each server's answer; DefaultTimeout when 0.
	Timeout time.Duration
}

// Check lists the API servers and asks each one which storage version hash
// it serves for r. It never fails: what it could not do is an Unchecked
// verdict that says why.
func (c Checker) Check(ctx context.Context, r Resource) Verdict {
	want := apidiscovery.StorageVersionHash(r.Group, r.Version, r.Kind)
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return Judge(want, nil, err, nil)
	}
	servers, err := Addresses(ctx, cs)
	if err != nil {
		return Judge(want, nil, err, nil)
	}
	answers := make([]Answer, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() { answers[i] = c.ask(s, r) })
	}
	wg.Wait()
	return Judge(want, servers, nil, answers)
}

// Addresses lists the API servers (host:port) from the kubernetes
// EndpointSlice in default, or from the kubernetes Endpoints when the slice
// cannot be read. Each API server's endpoint reconciler writes both, under
// that name: one slice, every server at the port they share. Only ready
// endpoints count: one not ready takes no request through the Service.
func Addresses(ctx context.Context, cs kubernetes.Interface) ([]string, error) {
	slice, sliceErr := cs.DiscoveryV1().EndpointSlices(serviceNamespace).Get(ctx, serviceName, metav1.GetOptions{})
	if sliceErr == nil {
		return sliceAddresses(slice), nil
	}
	endpoints, err := cs.CoreV1().Endpoints(serviceNamespace).Get(ctx, serviceName, metav1.GetOptions{}) //nolint:staticcheck // the fallback where the slice cannot be read
	if err != nil {
		return nil, fmt.Errorf("read the %s EndpointSlice in %s: %w; the Endpoints: %w", serviceName, serviceNamespace,
			reason(sliceErr), reason(err))
	}
	return endpointsAddresses(endpoints), nil
}

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
func (c Checker) ask(addr string, r Resource) Answer {
	hash, err := c.askAs(addr, r, serverName(c.Config))
	var wrongName x509.HostnameError
	if errors.As(err, &wrongName) {
		hash, err = c.askAs(addr, r, "")
	}
	return Answer{Server: addr, Hash: hash, Err: err}
}

func (c Checker) askAs(addr string, r Resource, name string) (string, error) {
	cfg := rest.CopyConfig(c.Config)
	cfg.Host, cfg.APIPath = "https://"+addr, ""
	cfg.ServerName = name
	cfg.Timeout = c.Timeout
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", err
	}
	resources, err := disco.ServerResourcesForGroupVersion(r.Group + "/" + r.Version)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, res := range resources.APIResources {
		if res.Name == r.Plural {
			return res.StorageVersionHash, nil
		}
	}
	return "", nil
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
