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

package driver

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/migration"
)

func TestADoorsTuningReachesTheEngineAsItIs(t *testing.T) {
	resource := schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}
	cfg := &rest.Config{Host: "https://example.com"}
	resume := migration.Progress{Continue: "page-3"}
	// The policy's settings differ from the door's tuning: the door's wins,
	// except where the writes go, which the plan checked on the policy.
	settings := graduatorv1alpha1.MigrationSettings{Concurrency: 4, PageSize: 50, QPS: 7, WriteTo: migration.WriteToStatus}
	door := &migration.Options{Concurrency: 12, PageSize: 200, QPS: 2.5, Priority: migration.PriorityFull,
		WriteTo: migration.WriteToObject, OnObject: func() {}}
	opts := (&Driver{Clients: Clients{Config: cfg}, Engine: door}).engineOptions(settings, resource, resume)
	if opts.QPS != 2.5 || opts.Concurrency != 12 || opts.PageSize != 200 || opts.Priority != migration.PriorityFull ||
		opts.OnObject == nil {
		t.Errorf("the door's tuning changed on its way to the engine: QPS %g, concurrency %d, page %d, priority %q",
			opts.QPS, opts.Concurrency, opts.PageSize, opts.Priority)
	}
	if opts.WriteTo != migration.WriteToStatus || opts.Resource != resource || opts.Config != cfg || opts.Resume.Continue != "page-3" {
		t.Errorf("the run's own options were not set: writeTo %q, resource %v, config %v, resume %q",
			opts.WriteTo, opts.Resource, opts.Config, opts.Resume.Continue)
	}
	if door.Resource != (schema.GroupVersionResource{}) {
		t.Error("the door's options were written to")
	}
}

func TestWithoutADoorsTuningThePolicysIsTheEngines(t *testing.T) {
	settings := graduatorv1alpha1.MigrationSettings{Concurrency: 4, PageSize: 50, QPS: 7,
		Priority: graduatorv1alpha1.PriorityFull, WriteTo: migration.WriteToStatus}
	opts := (&Driver{}).engineOptions(settings, schema.GroupVersionResource{Resource: "widgets"}, migration.Progress{})
	if opts.Concurrency != 4 || opts.PageSize != 50 || opts.QPS != 7 || opts.Priority != migration.PriorityFull ||
		opts.WriteTo != migration.WriteToStatus {
		t.Errorf("the policy's settings did not reach the engine: QPS %g, concurrency %d, page %d, priority %q, writeTo %q",
			opts.QPS, opts.Concurrency, opts.PageSize, opts.Priority, opts.WriteTo)
	}
}
