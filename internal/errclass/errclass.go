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

// Package errclass tells kinds of API server errors apart: the ones worth
// retrying, the ones a conversion webhook caused, the ones RBAC caused. The
// migration engine decides from them whether an error stops a run; the pure
// graduation package names from them the reason a stalled step shows. It
// imports nothing of Graduator, so both can use it.
package errclass

import (
	"errors"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// IsConversionError reports whether err comes from a CRD conversion webhook.
// The API server wraps those in a 500 whose message names the webhook; there
// is no structured cause.
func IsConversionError(err error) bool {
	return err != nil && strings.Contains(err.Error(), "conversion webhook")
}

// IsRBACDenial tells a Forbidden from the authorizer ("User ... cannot patch
// resource ...") from one returned by an admission webhook or policy, which
// rejects the object rather than the caller.
func IsRBACDenial(err error) bool {
	if !apierrors.IsForbidden(err) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, " cannot ") && !strings.Contains(msg, "admission") && !strings.Contains(msg, "denied")
}

// IsTimeout reports a client-side timeout anywhere in the chain: a context
// deadline or a net.Error that timed out both say Timeout().
func IsTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// noSpace is how etcd words its NOSPACE answer; the API server passes it on
// inside a 500 with no structured cause.
const noSpace = "database space exceeded"

// IsNoSpace reports whether etcd refused a write because its database
// reached its space quota (the NOSPACE alarm). Every write of every client
// then fails until an administrator frees space and disarms the alarm, so
// such an error is never worth retrying.
func IsNoSpace(err error) bool {
	return err != nil && strings.Contains(err.Error(), noSpace)
}

// NoSpaceAdvice says what to do about a full etcd (IsNoSpace).
const NoSpaceAdvice = "every write of every client fails until an administrator compacts and defragments etcd " +
	"(etcdctl compact, etcdctl defrag) or raises its --quota-backend-bytes, then disarms the alarm (etcdctl alarm disarm); " +
	"migrate again afterwards, with etcd's quota given (--etcd-quota, spec.migration.etcdQuota) so the space budget knows it"

// Retriable reports whether an error is worth retrying: throttling, server
// errors and broken connections. Conflicts, missing objects, rejections and
// a full etcd (IsNoSpace) are not.
func Retriable(err error) bool {
	switch {
	case IsNoSpace(err):
		return false
	case apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err), apierrors.IsUnexpectedServerError(err):
		return true
	case utilnet.IsConnectionReset(err), utilnet.IsConnectionRefused(err), utilnet.IsProbableEOF(err):
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code >= 500 {
		return true
	}
	return false
}

// Advice is an error whose whole message is what a person must do, such as
// the RBAC rules to add: a stall message quotes it untrimmed.
type Advice interface {
	error
	IsAdvice()
}

// IsAdvice reports whether err wraps an Advice.
func IsAdvice(err error) bool {
	var advice Advice
	return errors.As(err, &advice)
}
