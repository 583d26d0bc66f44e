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

package migration

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/graduator/graduator/internal/errclass"
)

// way: a conversion webhook that does not answer, an API server that stays
// unavailable after the retries, a request not authenticated or not allowed
// by RBAC. The run stops and a later run resumes from the last complete
// page. Rejections of the object itself (validation, an admission webhook
// or policy saying no) are counted as failures instead.
func stopsRun(err error) bool {
	switch {
	case err == nil:
		return false
	case errclass.IsNoSpace(err):
		return true
	case errclass.IsConversionError(err), errclass.Retriable(err), apierrors.IsUnauthorized(err):
		return true
	case apierrors.IsForbidden(err):
		return errclass.IsRBACDenial(err)
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// all, longer than a webhook's restart, shorter than a certificate rotation's
// worst case (a later run picks those up).
var retryBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 6, Cap: 5 * time.Second}

// retry calls fn until it succeeds, fails with an error that retrying cannot
// fix, or retryBackoff runs out. A Retry-After from the server is honoured.
func retry(ctx context.Context, fn func() error) error {
	backoff := retryBackoff
	for {
		err := fn()
		if err == nil || !errclass.Retriable(err) || backoff.Steps <= 1 {
			return err
		}
		delay := backoff.Step()
		if seconds, ok := apierrors.SuggestsClientDelay(err); ok && time.Duration(seconds)*time.Second > delay {
			delay = time.Duration(seconds) * time.Second
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// EtcdFullError is etcd's NOSPACE answer to a write of the run, which stops
// it at once: etcd refuses every write of every client until an
// administrator frees space and disarms its alarm, so retrying only hammers
// a cluster that cannot write.
type EtcdFullError struct{ Err error }

func (e *EtcdFullError) Error() string {
	return fmt.Sprintf("etcd is out of space (NOSPACE): %v; %s", e.Err, errclass.NoSpaceAdvice)
}

func (e *EtcdFullError) Unwrap() error { return e.Err }

func errorText(err error) string {
	if err == nil {
		return "unknown"
	}
	return err.Error()
}
