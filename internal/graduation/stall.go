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

package graduation

import (
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/graduator/graduator/internal/errclass"
	"github.com/graduator/graduator/internal/storagemigration"
)

// Reasons of a step that failed and is retried. The Ready condition carries
// one of them while the step keeps failing; it clears when the step
// succeeds again. They are contracts: alerts and runbooks match on them.
const (
	// ReasonConversionFailed: the CRD's conversion webhook did not convert.
	ReasonConversionFailed = "ConversionFailed"
	// ReasonAPIUnavailable: the API server answered 5xx or 429, timed out,
	// or could not be reached.
	ReasonAPIUnavailable = "APIUnavailable"
	// ReasonForbidden: the operator lacks a permission (RBAC) or credentials.
	ReasonForbidden = "Forbidden"
	// ReasonDiscoveryFailed: API discovery could not tell which storage
	// version the API server uses.
	ReasonDiscoveryFailed = "DiscoveryFailed"
	// ReasonConflict: the object kept being written by someone else.
	ReasonConflict = "Conflict"
	// ReasonEtcdSpaceExceeded: etcd reached its space quota (NOSPACE) and
	// refuses every write of every client; the message says what an
	// administrator must do. Retries then cost one write each.
	ReasonEtcdSpaceExceeded = "EtcdSpaceExceeded"
	// ReasonStepFailed: any other error; the message names the step.
	ReasonStepFailed = "StepFailed"
	// ReasonInTreeMigrationUnavailable: engine StorageVersionMigration on an
	// API server that does not serve storagemigration.k8s.io/v1 (before
	// Kubernetes 1.37); the message names the release it needs. Nothing was
	// switched or written.
	ReasonInTreeMigrationUnavailable = "InTreeMigrationUnavailable"
)

// StepDiscovery names the discovery read that precedes a migration, for
// Stall: it is not a step of its own in Plan.
const StepDiscovery = "Discovery"

// Backoff of a failing step: 5s, doubling, at most 5m.
const (
	stallRetryFirst = 5 * time.Second
	stallRetryMax   = 5 * time.Minute
	// maxStallMessage keeps the API server's words in the condition message
	// without letting a long webhook error fill the status.
	maxStallMessage = 600
)

// Stall describes a step that failed: why, in a person's words, and when it
// is tried again.
type Stall struct {
	// Reason is one of the Reason* constants above.
	Reason string
	// Message names the step, quotes the error (trimmed) and says when the
	// next try is.
	Message string
	// RetryAfter is the wait before the next try.
	RetryAfter time.Duration
}

// StallOf classifies the error a step returned on its attempt-th failure in
// a row (1 for the first) and says when to try again.
func StallOf(step string, err error, attempt int32) Stall {
	wait := RetryBackoff(attempt)
	reason := StallReason(step, err)
	if unserved := storagemigration.Unserved(err); unserved != nil {
		// A client's "no matches for kind" does not say which release
		// would serve the kind; the UnservedError does.
		err = unserved
	}
	text := strings.Join(strings.Fields(err.Error()), " ")
	advice := ""
	if reason == ReasonEtcdSpaceExceeded {
		// The advice is kept whole, whatever the error's length.
		text = strings.Replace(text, "; "+errclass.NoSpaceAdvice, "", 1)
		advice = "; " + errclass.NoSpaceAdvice
	}
	if len(text) > maxStallMessage && !errclass.IsAdvice(err) {
		text = text[:maxStallMessage] + "..."
	}
	text += advice
	return Stall{
		Reason:     reason,
		RetryAfter: wait,
		Message:    fmt.Sprintf("%s failed (attempt %d): %s; retrying in %s", step, attempt, text, wait),
	}
}

// StallReason names the kind of problem behind a failed step.
func StallReason(step string, err error) string {
	var inTree *storagemigration.FailedError
	switch {
	case storagemigration.Unserved(err) != nil:
		return ReasonInTreeMigrationUnavailable
	case errors.As(err, &inTree):
		// Before the conversion check: the in-tree migrator's message may
		// name a conversion webhook, and what to look at first is its object.
		return ReasonInTreeMigrationFailed
	case errclass.IsNoSpace(err):
		// Before the conversion check: a webhook's error may quote etcd's.
		return ReasonEtcdSpaceExceeded
	case errclass.IsConversionError(err):
		return ReasonConversionFailed
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return ReasonForbidden
	case apierrors.IsConflict(err):
		return ReasonConflict
	case step == StepDiscovery:
		return ReasonDiscoveryFailed
	case errclass.Retriable(err), errclass.IsTimeout(err):
		return ReasonAPIUnavailable
	}
	return ReasonStepFailed
}

// RetryBackoff is the wait before the next try after attempt failures in a
// row.
func RetryBackoff(attempt int32) time.Duration {
	wait := stallRetryFirst
	for i := int32(1); i < attempt && wait < stallRetryMax; i++ {
		wait *= 2
	}
	return min(wait, stallRetryMax)
}
