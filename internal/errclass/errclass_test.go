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

package errclass

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// noSpaceError is how the API server passes on etcd's NOSPACE answer.
var noSpaceError = apierrors.NewInternalError(errors.New("etcdserver: mvcc: database space exceeded"))

var gr = schema.GroupResource{Group: "restaurant.example.com", Resource: "pizzas"}

func TestRetriable(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		retriable bool
	}{
		{"throttled", apierrors.NewTooManyRequests("slow down", 2), true},
		{"a webhook outage (500)", apierrors.NewInternalError(errors.New("conversion webhook failed")), true},
		{"unavailable", apierrors.NewServiceUnavailable("later"), true},
		{"a server timeout", apierrors.NewServerTimeout(gr, "patch", 1), true},
		{"a reset connection", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, true},
		{"a conflict", apierrors.NewConflict(gr, "margherita", errors.New("changed")), false},
		{"gone", apierrors.NewNotFound(gr, "margherita"), false},
		{"rejected by admission", apierrors.NewForbidden(gr, "margherita", errors.New("denied")), false},
		{"invalid", apierrors.NewBadRequest("no"), false},
		{"etcd is full (NOSPACE): retrying hammers a read-only cluster", noSpaceError, false},
	} {
		if got := Retriable(tc.err); got != tc.retriable {
			t.Errorf("%s: Retriable = %t, want %t", tc.name, got, tc.retriable)
		}
	}
}

func TestKinds(t *testing.T) {
	conversion := apierrors.NewInternalError(errors.New(
		`conversion webhook for restaurant.example.com/v1alpha1, Kind=Pizza failed: Post "https://127.0.0.1:1/convert": connection refused`))
	rbac := apierrors.NewForbidden(gr, "margherita",
		errors.New(`User "graduator" cannot patch resource "pizzas" in API group "restaurant.example.com"`))
	admission := apierrors.NewForbidden(gr, "margherita", errors.New(`admission webhook "deny.example.com" denied the request: frozen`))
	for _, tc := range []struct {
		name                        string
		err                         error
		conversion, rbac, isTimeout bool
	}{
		{"a conversion webhook that does not answer", conversion, true, false, false},
		{"wrapped, still a conversion error", fmt.Errorf("migrate: %w", conversion), true, false, false},
		{"RBAC says no", rbac, false, true, false},
		{"an admission webhook says no: not RBAC", admission, false, false, false},
		{"a context deadline", context.DeadlineExceeded, false, false, true},
		{"no error", nil, false, false, false},
	} {
		if got := IsConversionError(tc.err); got != tc.conversion {
			t.Errorf("%s: IsConversionError = %t, want %t", tc.name, got, tc.conversion)
		}
		if got := IsRBACDenial(tc.err); got != tc.rbac {
			t.Errorf("%s: IsRBACDenial = %t, want %t", tc.name, got, tc.rbac)
		}
		if got := IsTimeout(tc.err); got != tc.isTimeout {
			t.Errorf("%s: IsTimeout = %t, want %t", tc.name, got, tc.isTimeout)
		}
	}
}

func TestIsNoSpace(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"etcd's NOSPACE answer through the API server", noSpaceError, true},
		{"wrapped", fmt.Errorf("rewrite widgets a/b: %w", noSpaceError), true},
		{"another internal error", apierrors.NewInternalError(errors.New("conversion webhook failed")), false},
		{"no error", nil, false},
	} {
		if got := IsNoSpace(tc.err); got != tc.want {
			t.Errorf("%s: IsNoSpace = %t, want %t", tc.name, got, tc.want)
		}
	}
}
