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

package crdmigrate

import (
	"errors"
	"fmt"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/driver"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/internal/metrics"
	"github.com/graduator/graduator/migration"
)

// DefaultSettleDelay is how long the controller waits, after it first sees
// a new storage version, before the migration takes its checkpoint, where
// the API servers cannot be asked one by one: each API server of an HA
// control plane learns the new storage version from its own watch, and one
// may still write the old one for a moment. Where they can be asked (the
// kubernetes EndpointSlice lists them), the controller waits until every
// one serves the new version, then 2 s.
const DefaultSettleDelay = graduation.DefaultSettleDelay

// DefaultName is the controller's name (in logs, metrics of
// controller-runtime, and as the Events' reporting controller).
const DefaultName = "crdmigrate"

// Options say which CRDs the controller graduates and how.
type Options struct {
	// CRDs are the names of the CRDs to graduate, such as
	// "widgets.example.com".
	CRDs []string
	// Groups selects every CRD of these API groups. A group written
	// "*.example.com" selects every group that ends in ".example.com".
	// A CRD is graduated when CRDs or Groups selects it; at least one
	// of the two must be set.
	Groups []string

	// WriteTo is where the no-op writes go: migration.WriteToObject (the
	// default) or migration.WriteToStatus, which bypasses admission
	// webhooks that reject no-op writes to the object (the CRD needs a
	// status subresource).
	WriteTo migration.WriteTarget
	// Concurrency is the upper bound on writers in flight; the engine adapts
	// below it (migration.DefaultConcurrency when 0).
	Concurrency int
	// Priority is how much of the API server a migration takes:
	// migration.PriorityBackground (the default) keeps other clients' write
	// rate at migration.BackgroundKept or more of their rate alone and its
	// own write latency within migration.BackgroundLatencyMax times one
	// write's alone,
	// migration.PriorityFull takes the server's full speed.
	Priority migration.Priority
	// PageSize is the LIST limit (migration.DefaultPageSize when 0).
	PageSize int64
	// QPS, when above 0, caps writes per second.
	QPS float32
	// EtcdQuota is etcd's space quota in bytes, when known: the migration
	// then lets the database grow to 3/4 of it between compactions (see
	// migration.Options.EtcdQuota). 0 when not told: etcd's default 2 GiB
	// is assumed, so a cluster that lowered its quota must tell it.
	EtcdQuota int64
	// AcceptLoss lists field paths (such as /status/conditions) the
	// conversion may lose; the round-trip proof refuses any other loss
	// before the first write.
	AcceptLoss []string
	// SettleDelay overrides DefaultSettleDelay (a negative value means none).
	SettleDelay time.Duration
	// MaxConcurrentMigrations is how many CRDs migrate at once; 1 when 0.
	MaxConcurrentMigrations int
	// Name is the controller's name; DefaultName when empty. Set it when a
	// manager adds the controller twice.
	Name string
}

func (o Options) validate() error {
	if len(o.CRDs) == 0 && len(o.Groups) == 0 {
		return errors.New("crdmigrate: Options name no CRD: set CRDs or Groups")
	}
	switch o.WriteTo {
	case "", migration.WriteToObject, migration.WriteToStatus:
	default:
		return fmt.Errorf("crdmigrate: unknown WriteTo %q", o.WriteTo)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.SettleDelay == 0 {
		o.SettleDelay = DefaultSettleDelay
	}
	if o.SettleDelay < 0 {
		o.SettleDelay = 0
	}
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.MaxConcurrentMigrations <= 0 {
		o.MaxConcurrentMigrations = 1
	}
	if o.WriteTo == "" {
		o.WriteTo = migration.WriteToObject
	}
	return o
}

// Selects reports whether the options select the CRD named name in group.
func (o Options) Selects(name, group string) bool {
	for _, n := range o.CRDs {
		if n == name {
			return true
		}
	}
	for _, g := range o.Groups {
		if driver.GroupMatches(g, group) {
			return true
		}
	}
	return false
}

// Add adds to mgr a controller that graduates the CRDs opts selects (see
// the package documentation). It builds its clients from the manager's
// rest.Config, watches CRDs through the manager's cache (metadata only) and
// starts with the manager, on the leader. A manager whose scheme lacks
// apiextensions.k8s.io/v1 (client-go's default scheme) gets it added.
func Add(mgr ctrl.Manager, opts Options) error {
	if err := opts.validate(); err != nil {
		return err
	}
	opts = opts.withDefaults()
	if scheme := mgr.GetScheme(); !scheme.Recognizes(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")) {
		if err := apiextensionsv1.AddToScheme(scheme); err != nil {
			return fmt.Errorf("crdmigrate: add apiextensions.k8s.io/v1 to the manager's scheme: %w", err)
		}
	}
	clients, err := driver.ClientsFor(mgr.GetConfig(), mgr.GetClient(), mgr.GetAPIReader())
	if err != nil {
		return fmt.Errorf("crdmigrate: %w", err)
	}
	r := &reconciler{
		client: mgr.GetClient(), reader: mgr.GetAPIReader(), spec: opts.policySpec(),
		driver: &driver.Driver{
			Clients:          clients,
			Reporter:         reporter{recorder: mgr.GetEventRecorder(opts.Name)},
			Metrics:          metrics.Recorder{},
			Needs:            needs,
			Engine:           opts.engineTuning(),
			EtcdQuota:        opts.EtcdQuota,
			EtcdQuotaSetting: "crdmigrate.Options.EtcdQuota",
			AcceptLoss:       "crdmigrate.Options.AcceptLoss",
		},
	}
	selected := predicate.NewPredicateFuncs(func(o client.Object) bool {
		// A metadata-only object has no spec.group: the name's suffix after
		// the plural is the group, by the API server's own rule.
		_, group, _ := strings.Cut(o.GetName(), ".")
		return opts.Selects(o.GetName(), group)
	})
	err = ctrl.NewControllerManagedBy(mgr).
		Named(opts.Name).
		For(&apiextensionsv1.CustomResourceDefinition{}, builder.OnlyMetadata, builder.WithPredicates(selected, driver.Interrupting(r.driver, migration.ErrCRDChanged))).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentMigrations}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("crdmigrate: set up the controller: %w", err)
	}
	return nil
}

// engineTuning is the engine's tuning the options set, passed to every run
// as it is.
func (o Options) engineTuning() *migration.Options {
	return &migration.Options{Concurrency: o.Concurrency, PageSize: o.PageSize, QPS: o.QPS, Priority: o.Priority}
}

// policySpec is the graduation the controller runs for each selected CRD:
// GitOps mode (the CRD's own storage flag is the target; spec.versions is
// never written), writing where the options say.
func (o Options) policySpec() graduatorv1alpha1.CRDVersionPolicySpec {
	return graduatorv1alpha1.CRDVersionPolicySpec{Migration: driver.Settings(o.WriteTo, o.SettleDelay, o.AcceptLoss)}
}
