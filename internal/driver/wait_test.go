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
	"context"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/enginehook"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/migration"
)

type events []string

func (e *events) Event(_ *graduatorv1alpha1.CRDVersionPolicy, _ *apiextensionsv1.CustomResourceDefinition, _, reason, _, message string) {
	*e = append(*e, reason+": "+message)
}

func (*events) Planned(*graduatorv1alpha1.CRDVersionPolicy, graduation.Step, graduatorv1alpha1.Phase) {
}

func TestARunsFirstWaitForACompactionIsAnEvent(t *testing.T) {
	var got events
	d := &Driver{Reporter: &got}
	g := &run{policy: &graduatorv1alpha1.CRDVersionPolicy{}}
	wait := "waiting for etcd's next compaction ...: tell the quota with " + PolicyEtcdQuotaSetting
	d.waitStarted(g, migration.Progress{}, "")                                           // writing
	d.waitStarted(g, migration.Progress{CompactionWait: wait, CompactionWaits: 1}, "")   // the first wait starts
	d.waitStarted(g, migration.Progress{CompactionWait: wait, CompactionWaits: 1}, wait) // it goes on
	d.waitStarted(g, migration.Progress{CompactionWait: wait, CompactionWaits: 2}, "")   // the next one: the status says it
	if len(got) != 1 || got[0] != ReasonWaitingForCompaction+": "+wait {
		t.Errorf("events %q, want one %s with the wait", got, ReasonWaitingForCompaction)
	}
}

func TestTheEngineIsToldWhereThePolicyTellsTheQuota(t *testing.T) {
	resource := schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}
	d := &Driver{}
	opts := d.engineOptions(graduatorv1alpha1.MigrationSettings{}, resource, migration.Progress{})
	if setting := enginehook.From(d.engineHook(context.Background())).QuotaSetting; setting != PolicyEtcdQuotaSetting || opts.EtcdQuota != 0 {
		t.Errorf("the operator's run: quota %d told at %q", opts.EtcdQuota, setting)
	}
	d = &Driver{EtcdQuotaSetting: "--etcd-quota", EtcdQuota: 8 << 30}
	opts = d.engineOptions(graduatorv1alpha1.MigrationSettings{}, resource, migration.Progress{})
	measured := enginehook.With(context.Background(), enginehook.Hook{FixedConcurrency: true})
	if h := enginehook.From(d.engineHook(measured)); h.QuotaSetting != "--etcd-quota" || opts.EtcdQuota != 8<<30 || !h.FixedConcurrency {
		t.Errorf("the CLI's run: quota %d told at %q, a measurement's knob kept: %t", opts.EtcdQuota, h.QuotaSetting, h.FixedConcurrency)
	}
}
