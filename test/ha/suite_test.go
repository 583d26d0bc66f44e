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

// Package ha_test graduates CRDs on an HA control plane: three real API
// servers on one etcd behind a TCP balancer, one of them learning the
// storage switch late because its view of etcd lags. It proves, from etcd,
// that every door which runs the pass leaves nothing in the old version
// once storedVersions is pruned.
package ha_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graduator/graduator/internal/apiservers"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/envtestutil/envsuite"
)

// The rig: env's API server (A, 127.0.0.1) and two more on the same port of
// 127.0.0.2 (B) and 127.0.0.3 (C), C's etcd behind a LagProxy; a Balancer
// in front of the three.
var (
	env      *envtestutil.Env
	balancer *envtestutil.Balancer
	lag      *envtestutil.LagProxy
	// balanced reaches the cluster through the balancer, over HTTP/1.1:
	// HTTP/2 would carry every request on one connection, so to one server.
	balanced   *rest.Config
	kubeconfig string
	cliBinary  string
	// servers are A's, B's and C's addresses, in that order.
	servers []string
)

func TestHA(t *testing.T) {
	envsuite.RunSpecs(t, "Several API servers on one etcd suite (envtest)")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	env = envsuite.Start(envtestutil.Options{Unthrottled: true, Configure: func(e *envtest.Environment) error {
		// The suite writes the kubernetes EndpointSlice itself (see
		// listServers); the other servers take this flag from this one.
		e.ControlPlane.GetAPIServer().Configure().Set("endpoint-reconciler-type", "none")
		return nil
	}})
	var err error
	lag, err = envtestutil.StartLagProxy(env.Environment.ControlPlane.Etcd.URL.Host)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(lag.Close)
	first := env.Environment.ControlPlane.APIServer.ListenAddr
	servers = []string{net.JoinHostPort(first.Address, first.Port)}
	// B, then C, which reaches etcd through the LagProxy.
	for _, s := range []envtestutil.APIServerOptions{
		{IP: "127.0.0.2", EtcdURL: env.Environment.ControlPlane.Etcd.URL.String()},
		{IP: "127.0.0.3", EtcdURL: "http://" + lag.Addr()},
	} {
		s.Out = GinkgoWriter
		server, err := envtestutil.StartAPIServer(env.Environment, s)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(server.Stop)
		servers = append(servers, server.Address)
	}
	balancer, err = envtestutil.StartBalancer(servers...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(balancer.Close)

	balanced = rest.CopyConfig(env.Config)
	balanced.Host = "https://" + balancer.Addr()
	balanced.NextProtos = []string{"http/1.1"}
	kubeconfig = writeKubeconfig(balancer.Addr())

	listServers(ctx)

	cliBinary, err = gexec.Build("github.com/graduator/graduator/cmd/graduator")
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(5*time.Minute))

// listServers writes the kubernetes EndpointSlice in default as the API
// servers' endpoint reconciler would on a control plane of three machines:
// each server's address at the port they share. Neither can here: the
// reconciler refuses an advertise address in the loopback range (and
// advertises the host's address instead, where nothing listens), and the
// API refuses a slice listing loopback addresses ("may not be in the
// loopback range"). So every server runs with
// --endpoint-reconciler-type=none, and the suite puts the slice in etcd
// itself, where the API servers read it from.
func listServers(ctx context.Context) {
	var ips []string
	for _, s := range servers {
		host, _, err := net.SplitHostPort(s)
		Expect(err).NotTo(HaveOccurred())
		ips = append(ips, host)
	}
	listAddresses(ctx, ips...)
}

// listAddresses writes the kubernetes EndpointSlice with ips at the
// servers' port, and waits until it reads so.
func listAddresses(ctx context.Context, ips ...string) {
	_, port, err := net.SplitHostPort(servers[0])
	Expect(err).NotTo(HaveOccurred())
	p, err := strconv.Atoi(port)
	Expect(err).NotTo(HaveOccurred())
	slice := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: discoveryv1.SchemeGroupVersion.String(), Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: metav1.NamespaceDefault, UID: uuid.NewUUID(),
			CreationTimestamp: metav1.Now(), Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: ips, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(p)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	data, err := json.Marshal(slice)
	Expect(err).NotTo(HaveOccurred())
	_, err = env.Etcd.Client().Put(ctx, env.Etcd.Prefix+"/endpointslices/default/kubernetes", string(data))
	Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(env.Config)
	Expect(err).NotTo(HaveOccurred())
	var want []string
	for _, ip := range ips {
		want = append(want, net.JoinHostPort(ip, port))
	}
	Eventually(func() ([]string, error) { return apiservers.Addresses(ctx, cs) }).
		Should(ConsistOf(want), "the kubernetes EndpointSlice lists %v", want)
}

// writeKubeconfig writes an admin's kubeconfig whose server is addr, the
// balancer: the one address a person's kubeconfig names.
func writeKubeconfig(addr string) string {
	user, err := env.Environment.AddUser(envtest.User{Name: "ha-admin", Groups: []string{"system:masters"}}, nil)
	Expect(err).NotTo(HaveOccurred())
	data, err := user.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	cfg, err := clientcmd.Load(data)
	Expect(err).NotTo(HaveOccurred())
	for _, c := range cfg.Clusters {
		c.Server = "https://" + addr
	}
	dir, err := os.MkdirTemp("", "graduator-ha-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	path := filepath.Join(dir, "kubeconfig")
	Expect(clientcmd.WriteToFile(*cfg, path)).To(Succeed())
	return path
}

// lagFor is how late C learns the storage switch: 8 s in `make test`,
// HA_LAG (such as 25s) for the long run.
func lagFor() time.Duration {
	if s := os.Getenv("HA_LAG"); s != "" {
		d, err := time.ParseDuration(s)
		Expect(err).NotTo(HaveOccurred(), "HA_LAG")
		return d
	}
	return 8 * time.Second
}

// switchLate makes v2 the storage version of crd, through A, while C sees
// etcd late: every byte etcd sends C from just before the switch to just
// after it arrives lagFor() late, and whatever follows queues behind it. C
// learns the switch that much later than A and B (its CRD watch delivers
// it late); meanwhile it takes writes and stores them at once, with the
// old storage version, answering once its view catches up. The doors start
// a moment after the switch, as a person's run does after applying a
// release.
func switchLate(ctx context.Context, crdName string) {
	lag.SetDelay(lagFor())
	defer lag.SetDelay(0)
	Expect(envtestutil.SetStorageVersion(ctx, env.Client, crdName, "v2")).To(Succeed())
	// The switch's watch event leaves etcd a moment after A's answer (a
	// loaded machine may take longer: what C is sent until then is held
	// too, and whatever follows queues behind it).
	time.Sleep(2 * time.Second)
	GinkgoWriter.Printf("%s: v2 stores %s; C sees etcd %s late around the switch\n",
		time.Now().Format(time.RFC3339Nano), crdName, lagFor())
}

// switchHeld makes v2 the storage version of crd, through A, while C sees
// nothing etcd sends from just before the switch until released: C has
// not learned the switch however long the door takes to first ask, so a
// door that checks every server must be seen waiting for it. It releases C
// a second after waitedForC says the door waited for it, or after a minute
// (a door that does not check has then written through C at v1); the
// returned func stops it and releases C.
func switchHeld(ctx context.Context, crdName string, waitedForC func() bool) (stop func()) {
	lag.Hold()
	Expect(envtestutil.SetStorageVersion(ctx, env.Client, crdName, "v2")).To(Succeed())
	GinkgoWriter.Printf("%s: v2 stores %s; C held until the door waits for it\n", time.Now().Format(time.RFC3339Nano), crdName)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		bound := time.After(time.Minute)
		for {
			select {
			case <-done:
				return
			case <-bound:
				GinkgoWriter.Printf("%s: the door never waited for C; C released\n", time.Now().Format(time.RFC3339Nano))
				lag.Release()
				return
			case <-tick.C:
				if waitedForC() {
					// Held a moment longer, as a server late by seconds is.
					time.Sleep(time.Second)
					GinkgoWriter.Printf("%s: the door waits for C; C released\n", time.Now().Format(time.RFC3339Nano))
					lag.Release()
					return
				}
			}
		}
	}()
	return func() { close(done); lag.Release() }
}
