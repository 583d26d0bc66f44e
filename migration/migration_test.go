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
	"errors"
	"net"
	"syscall"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestMigration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "migration (pure parts)")
}

var _ = Describe("the checkpoint", func() {
	DescribeTable("an object is skipped only when written after the checkpoint",
		func(rv, checkpoint string, newer bool) {
			got, _ := isNewer(rv, checkpoint)
			Expect(got).To(Equal(newer))
		},
		Entry("newer", "1001", "1000", true),
		Entry("older", "999", "1000", false),
		Entry("equal", "1000", "1000", false),
		Entry("longer numbers compare as numbers", "10000", "9999", true),
		Entry("no checkpoint yet", "5", "", false),
		Entry("an unparsable version is rewritten", "abc", "1000", false),
	)
})

var _ = Describe("Retriable", func() {
	gr := schema.GroupResource{Group: "restaurant.example.com", Resource: "pizzas"}
	DescribeTable("which errors are retried",
		func(err error, retriable bool) { Expect(Retriable(err)).To(Equal(retriable)) },
		Entry("throttled", apierrors.NewTooManyRequests("slow down", 2), true),
		Entry("a webhook outage (500)", apierrors.NewInternalError(errors.New("conversion webhook failed")), true),
		Entry("unavailable", apierrors.NewServiceUnavailable("later"), true),
		Entry("a server timeout", apierrors.NewServerTimeout(gr, "patch", 1), true),
		Entry("a reset connection", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, true),
		Entry("a conflict", apierrors.NewConflict(gr, "margherita", errors.New("changed")), false),
		Entry("gone", apierrors.NewNotFound(gr, "margherita"), false),
		Entry("rejected by admission", apierrors.NewForbidden(gr, "margherita", errors.New("denied")), false),
		Entry("invalid", apierrors.NewBadRequest("no"), false),
	)
})
