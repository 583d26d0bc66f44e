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
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func TestJudge(t *testing.T) {
	three := []string{"10.0.0.3:6443", "10.0.0.1:6443", "10.0.0.2:6443"}
	agree := func(servers ...string) []Answer {
		var out []Answer
		for _, s := range servers {
			out = append(out, Answer{Server: s, Hash: "new"})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		listed  []string
		listErr error
		answers []Answer
		want    State
		says    string
	}{
		{"every server serves the new hash", three, nil, agree(three...), Agree, "every one of 3 API servers"},
		{"one server still serves the old hash: wait for it", three, nil,
			append(agree("10.0.0.1:6443", "10.0.0.2:6443"), Answer{Server: "10.0.0.3:6443", Hash: "old"}), Behind,
			"API server 10.0.0.3:6443 still serves storage version hash old"},
		{"one server does not serve the version yet", three, nil,
			append(agree("10.0.0.1:6443", "10.0.0.2:6443"), Answer{Server: "10.0.0.3:6443"}), Behind,
			"does not serve the storage version yet"},
		{"one behind and one unreachable: wait for the one behind", three, nil, []Answer{
			{Server: "10.0.0.1:6443", Hash: "new"}, {Server: "10.0.0.2:6443", Err: errors.New("i/o timeout")},
			{Server: "10.0.0.3:6443", Hash: "old"}}, Behind, "10.0.0.3:6443"},
		{"a managed control plane: the addresses are not reachable", three, nil, []Answer{
			{Server: "10.0.0.1:6443", Err: errors.New("i/o timeout")}, {Server: "10.0.0.2:6443", Hash: "new"},
			{Server: "10.0.0.3:6443", Hash: "new"}}, Unchecked, "1 of 3 API servers cannot be asked one by one from here (10.0.0.1:6443: i/o timeout)"},
		{"a server listed but not asked is not taken for agreeing", three, nil, agree("10.0.0.1:6443", "10.0.0.2:6443"),
			Unchecked, "10.0.0.3:6443 was not asked"},
		{"the slice cannot be read", nil, errors.New("forbidden"), nil, Unchecked, "cannot be listed: forbidden"},
		{"the slice cannot be read now (a timeout): not the clock, the check again", nil,
			notNow{errors.New("the server was unable to return a response in the time allotted")}, nil, Behind,
			"could not be listed now (looking again): the server was unable"},
		{"the slice lists nobody", nil, nil, nil, Unchecked, "lists no API server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge("new", tc.listed, tc.listErr, tc.answers)
			if v.State != tc.want || !strings.Contains(v.Reason, tc.says) {
				t.Errorf("Judge = %s %q, want %s saying %q", v.State, v.Reason, tc.want, tc.says)
			}
			if tc.listErr == nil && len(tc.listed) > 0 && !slices.IsSorted(v.Servers) {
				t.Errorf("servers not sorted: %v", v.Servers)
			}
		})
	}
}

func TestAnswersThroughTheFrontDoorMeetALateServer(t *testing.T) {
	for _, tc := range []struct{ n, want int }{{0, 0}, {1, 1}, {2, 14}, {3, 23}, {5, 42}} {
		k := AnswersFor(tc.n, MissedAtMost)
		if k != tc.want {
			t.Errorf("AnswersFor(%d) = %d, want %d", tc.n, k, tc.want)
		}
		if tc.n > 1 && (Missed(tc.n, k) >= MissedAtMost || Missed(tc.n, k-1) < MissedAtMost) {
			t.Errorf("%d answers over %d servers: missed %g; one fewer %g: not the least count under %g",
				k, tc.n, Missed(tc.n, k), Missed(tc.n, k-1), MissedAtMost)
		}
	}
}

func TestCountOfServersBehindTheFrontDoor(t *testing.T) {
	forbidden := errors.New("forbidden")
	for _, tc := range []struct {
		name  string
		count Count
		want  int
		says  string
	}{
		{"the Leases count every server", Count{Listed: 1, Leases: 3}, 3, "3 by their identity Leases"},
		{"the slice lists more than hold a live Lease", Count{Listed: 3, Leases: 2}, 3, "3 listed in the EndpointSlice"},
		{"the slice forbidden, the Leases read", Count{ListErr: forbidden, Leases: 2}, 2, "2 by their identity Leases"},
		{"the Leases forbidden: three at least", Count{Listed: 1, LeasesErr: forbidden}, 3, "at least 3 assumed"},
		{"five listed, the Leases forbidden", Count{Listed: 5, LeasesErr: forbidden}, 5, "5 listed"},
		{"neither read", Count{ListErr: forbidden, LeasesErr: forbidden}, 0, ""},
		{"nothing listed, no Lease", Count{}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, how := tc.count.Servers()
			if n != tc.want || !strings.Contains(how, tc.says) {
				t.Errorf("Servers() = %d %q, want %d saying %q", n, how, tc.want, tc.says)
			}
		})
	}
}

func TestJudgeFrontDoor(t *testing.T) {
	unreachable := Verdict{State: Unchecked, Servers: []string{"10.0.0.1:6443", "10.0.0.2:6443", "10.0.0.3:6443"},
		Reason: "3 of 3 API servers cannot be asked one by one from here (10.0.0.1:6443: connection refused; ...)"}
	three := Count{Listed: 3, Leases: 3}
	answers := func(k int, late int, peers ...string) []Answer {
		out := make([]Answer, k)
		for i := range out {
			out[i] = Answer{Server: "https://lb:443", Hash: "new", Peer: peers[i%len(peers)]}
		}
		if late >= 0 {
			out[late].Hash = "old"
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		direct  Verdict
		count   Count
		answers []Answer
		want    State
		says    []string
	}{
		{"every answer at the new hash, the figure said first", unreachable, three, answers(23, -1, "a", "b", "c"), Agree,
			[]string{"23 answers through the front door", "a late one of 3 API servers (3 by their identity Leases) missed with probability 8.9e-05",
				"; 3 of 3 API servers cannot be asked one by one"}},
		{"one answer of 23 from a late server: wait", unreachable, three, answers(23, 17, "a"), Behind,
			[]string{"still serves storage version hash old", "answer 18 of 23"}},
		{"a late server that does not serve the version yet", unreachable, three,
			append(answers(3, -1, "a"), Answer{Server: "https://lb:443"}), Behind, []string{"does not serve the storage version yet"}},
		{"one serving certificate for every answer: affinity cannot be told", unreachable, three, answers(23, -1, "a"), Agree,
			[]string{"same serving certificate", "session affinity"}},
		{"the front door does not answer: asked again, not left to the clock", unreachable, three,
			append(answers(3, -1, "a"), Answer{Server: "https://lb:443", Err: errors.New("connection reset by peer")}), Behind,
			[]string{"the front door did not answer (looking again): connection reset by peer", "cannot be asked one by one"}},
		{"one server: the front door is the server", Verdict{State: Unchecked}, Count{Listed: 1, Leases: 1}, answers(1, -1, "a"), Agree,
			[]string{"the one API server (1 by their identity Leases) serves storage version hash new"}},
		{"the count unknown: nothing can be derived", unreachable, Count{ListErr: errors.New("forbidden"), LeasesErr: errLeasesForbidden}, nil,
			Unchecked, []string{"the number of API servers is unknown", "list on leases in kube-system"}},
		{"a direct verdict stands", Verdict{State: Agree, Reason: "every one of 3"}, three, nil, Agree, []string{"every one of 3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := JudgeFrontDoor("new", tc.direct, tc.count, tc.answers)
			if v.State != tc.want {
				t.Errorf("JudgeFrontDoor = %s %q, want %s", v.State, v.Reason, tc.want)
			}
			for _, s := range tc.says {
				if !strings.Contains(v.Reason, s) {
					t.Errorf("reason %q does not say %q", v.Reason, s)
				}
			}
		})
	}
	if v := JudgeFrontDoor("new", unreachable, Count{Listed: 3, LeasesErr: errLeasesForbidden}, answers(23, -1, "a", "b")); v.Remedy != "" {
		t.Errorf("counted and checked, yet a remedy: %q", v.Remedy)
	}
	if v := JudgeFrontDoor("new", unreachable, Count{ListErr: errors.New("x"), LeasesErr: errLeasesForbidden}, nil); v.Remedy != "list on leases in kube-system" {
		t.Errorf("remedy %q, want the right to list the Leases", v.Remedy)
	}
}

func TestAServerErrorIsCutToItsCause(t *testing.T) {
	long := errors.New(strings.Repeat("Get \"https://10.0.0.1:6443/apis/x/v1\": ", 5) + "dial tcp 10.0.0.1:6443: connect: connection refused")
	if got := short(long); len(got) > maxErrorText || !strings.HasSuffix(got, "connection refused") {
		t.Errorf("short = %q (%d), want at most %d ending with the cause", got, len(got), maxErrorText)
	}
}

func TestJoined(t *testing.T) {
	if got := Joined([]string{"a:1", "b:1"}, []string{"b:1", "c:1", "a:1"}); !slices.Equal(got, []string{"c:1"}) {
		t.Errorf("Joined = %v, want [c:1]", got)
	}
	if got := Joined([]string{"a:1", "b:1"}, []string{"a:1"}); got != nil {
		t.Errorf("a server that left is no server that joined: %v", got)
	}
}

func TestAddresses(t *testing.T) {
	slice := func(endpoints ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "kubernetes", Namespace: "default"},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](6443)}},
			Endpoints:   endpoints,
		}
	}
	at := func(ready *bool, addrs ...string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: addrs, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	}
	endpoints := &corev1.Endpoints{ //nolint:staticcheck // the fallback under test
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default"},
		Subsets: []corev1.EndpointSubset{{ //nolint:staticcheck // the fallback under test
			Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}},
			Ports:     []corev1.EndpointPort{{Name: "https", Port: 6443}}, //nolint:staticcheck // the fallback under test
		}},
	}
	forbidSlices := func(cs *fake.Clientset) {
		cs.PrependReactor("get", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "kubernetes", errors.New("no"))
		})
	}
	for _, tc := range []struct {
		name    string
		objects []runtime.Object
		react   func(*fake.Clientset)
		want    []string
		wantErr string
	}{
		{"every address of the slice", []runtime.Object{slice(at(nil, "10.0.0.1"), at(ptr.To(true), "10.0.0.2"))}, nil,
			[]string{"10.0.0.1:6443", "10.0.0.2:6443"}, ""},
		{"an endpoint not ready takes no request", []runtime.Object{slice(at(nil, "10.0.0.1"), at(ptr.To(false), "10.0.0.2"))}, nil,
			[]string{"10.0.0.1:6443"}, ""},
		{"the Endpoints when the slice is forbidden", []runtime.Object{slice(at(nil, "10.9.9.9")), endpoints}, forbidSlices,
			[]string{"10.0.0.1:6443", "10.0.0.2:6443"}, ""},
		{"neither can be read", nil, forbidSlices, nil, "forbidden (reading them takes get on the EndpointSlice"},
		{"the slice not read now: no fallback, a check to take again", []runtime.Object{endpoints}, func(cs *fake.Clientset) {
			cs.PrependReactor("get", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewTimeoutError("the server was unable to return a response in the time allotted", 1)
			})
		}, nil, "read the kubernetes EndpointSlice in default: Timeout: the server was unable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(tc.objects...)
			if tc.react != nil {
				tc.react(cs)
			}
			got, err := Addresses(context.Background(), cs)
			if tc.wantErr != "" {
				if strings.Contains(tc.name, "now") && !errors.As(err, new(notNow)) {
					t.Errorf("a read that may pass is not told apart: %v", err)
				}
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Addresses error = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Addresses = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIdentityLeasesCountTheLiveServers(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	lease := func(name string, renewed time.Duration, component string) runtime.Object {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: map[string]string{identityLabel: component}},
			Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: now.Add(-renewed)},
				LeaseDurationSeconds: ptr.To[int32](3600)},
		}
	}
	cs := fake.NewClientset(lease("apiserver-a", 5*time.Second, "kube-apiserver"), lease("apiserver-b", 30*time.Minute, "kube-apiserver"),
		lease("apiserver-gone", 2*time.Hour, "kube-apiserver"), lease("scheduler", time.Second, "kube-scheduler"))
	if n, err := identityLeases(context.Background(), cs, now); err != nil || n != 2 {
		t.Errorf("identityLeases = %d, %v; want the 2 kube-apiserver Leases not expired", n, err)
	}
	cs.PrependReactor("list", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "", errors.New("no"))
	})
	if _, err := identityLeases(context.Background(), cs, now); !errors.Is(err, errLeasesForbidden) {
		t.Errorf("forbidden: %v, want the error naming the right", err)
	}
}

func TestAServerFoundUnreachableIsNotDialledAgainForAWhile(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	c := &Checker{Clock: clk}
	refused := errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")
	if !unreachableErr(refused) || unreachableErr(apierrors.NewForbidden(schema.GroupResource{}, "", errors.New("no"))) {
		t.Fatal("a refused dial is unreachable; a server's own answer is not")
	}
	c.remember("10.0.0.1:6443", refused)
	if err := c.knownUnreachable("10.0.0.1:6443"); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("just found unreachable: %v", err)
	}
	if err := c.knownUnreachable("10.0.0.2:6443"); err != nil {
		t.Errorf("another server: %v", err)
	}
	clk.SetTime(clk.Now().Add(unreachableFor + time.Second))
	if err := c.knownUnreachable("10.0.0.1:6443"); err != nil {
		t.Errorf("dialled again once %s passed: %v", unreachableFor, err)
	}
}
