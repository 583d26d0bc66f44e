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

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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
			{Server: "10.0.0.3:6443", Hash: "new"}}, Unchecked, "1 of 3 API servers cannot be asked one by one (10.0.0.1:6443: i/o timeout)"},
		{"a server listed but not asked is not taken for agreeing", three, nil, agree("10.0.0.1:6443", "10.0.0.2:6443"),
			Unchecked, "10.0.0.3:6443 was not asked"},
		{"the slice cannot be read", nil, errors.New("forbidden"), nil, Unchecked, "cannot be listed: forbidden"},
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(tc.objects...)
			if tc.react != nil {
				tc.react(cs)
			}
			got, err := Addresses(context.Background(), cs)
			if tc.wantErr != "" {
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
