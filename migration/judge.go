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
	"fmt"

	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// fate is what became of one object.
type fate int

const (
	// rewritten: the API server acknowledged the write.
	rewritten fate = iota
	// skipped: proven done without a write of ours.
	skipped
	// failed: not proven done; blocks pruning.
	failed
	// writeAgain: the object changed but is not proven done; write it again.
	writeAgain
	// notCounted: the run stopped before the object was handled; its page
	// is not done and is listed again on resume.
	notCounted
	// dispatched: every object of the page was handed out (not an object).
	dispatched
	// passedOver: the catch-up sweep has nothing to do with the object.
	passedOver
)

// ObjectVersion identifies one state of an object.
type ObjectVersion struct {
	UID, ResourceVersion string
}

// judge decides, after the API server refused a no-op write with a conflict
// or not-found, what a fresh read of the object proves. current is nil when
// the read found no object. It is the invariant of the package: an object
// is done only when it is gone, was replaced (another uid), or was written
// after the checkpoint; an object that still exists as it was listed is not
// done, whatever the write said (a 404 from a missing status subresource
// looks exactly like a deleted object).
func judge(written ObjectVersion, current *ObjectVersion, checkpoint string) fate {
	switch {
	case current == nil:
		return skipped // deleted
	case current.UID != written.UID:
		return skipped // deleted and created again: stored in the new version
	}
	if newer, _ := isNewer(current.ResourceVersion, checkpoint); newer {
		return skipped
	}
	if current.ResourceVersion != written.ResourceVersion {
		return writeAgain
	}
	return failed
}

// NoOpPatch is the JSON merge patch the migration sends: it changes nothing
// and fails unless the object still has this uid and resourceVersion.
func NoOpPatch(v ObjectVersion) []byte {
	return fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q,"uid":%q}}`, v.ResourceVersion, v.UID)
}

// isNewerOrUnknown reports whether rv may be newer than the checkpoint:
// true when it is, or when either cannot be compared.
func isNewerOrUnknown(rv, checkpoint string) bool {
	newer, err := isNewer(rv, checkpoint)
	return newer || err != nil || checkpoint == "" || rv == ""
}

// isNewer reports whether resourceVersion rv is newer than the checkpoint.
// Unparsable versions are never newer: the object is then rewritten, which is
// always safe.
func isNewer(rv, checkpoint string) (bool, error) {
	if checkpoint == "" || rv == "" {
		return false, nil
	}
	cmp, err := resourceversion.CompareResourceVersion(rv, checkpoint)
	if err != nil {
		return false, err
	}
	return cmp > 0, nil
}
