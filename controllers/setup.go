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

package controllers

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/graduator/graduator/internal/driver"
)

// Options configure the operator's controllers.
type Options struct {
	// MaxConcurrentGraduations is how many CRDs migrate at the same time; 1
	// when 0.
	MaxConcurrentGraduations int
	// EtcdQuota is etcd's space quota in bytes (the manager's --etcd-quota)
	// for policies that set no spec.migration.etcdQuota; 0: unknown.
	EtcdQuota int64
}

// Setup registers Graduator's controllers with a manager (created with
// CacheOptions): the policy reconciler, the fleet reconciler of selector
// policies (whose generated policies share the policy reconciler's limit of
// MaxConcurrentGraduations): the policy
// reconciler and the drift reporter. The operator binary, the demo and the
// test suites all wire the operator through it, from the manager's
// rest.Config (wrap its transport there to observe the operator's requests).
func Setup(mgr ctrl.Manager, opts Options) error {
	clients, err := driver.ClientsFor(mgr.GetConfig(), mgr.GetClient(), mgr.GetAPIReader())
	if err != nil {
		return err
	}
	recorder := mgr.GetEventRecorder("graduator")
	if err := (&policyReconciler{
		Clients:                 clients,
		Recorder:                recorder,
		MaxConcurrentReconciles: opts.MaxConcurrentGraduations,
		EtcdQuota:               opts.EtcdQuota,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the CRDVersionPolicy controller: %w", err)
	}
	if err := (&fleetReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: recorder}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the fleet controller: %w", err)
	}
	if err := (&driftReporter{Client: mgr.GetClient(), Recorder: recorder}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the drift reporter: %w", err)
	}
	return nil
}
