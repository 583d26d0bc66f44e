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

// Retriable reports whether an error is worth retrying: throttling, server
// errors and broken connections. Conflicts, missing objects and rejections
// are not.
func Retriable(err error) bool {
	switch {
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
