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

package crdmigrate_test

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/graduator/graduator/crdmigrate"
	"github.com/graduator/graduator/migration"
)

// An operator adds the controller to the manager it already runs, naming
// the CRDs it ships. When a new release of the operator flips a CRD's
// storage version, the controller migrates that CRD's objects and prunes
// status.storedVersions, so that the release after may drop the old
// version.
func ExampleAdd() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{})
	if err != nil {
		panic(err)
	}
	if err := crdmigrate.Add(mgr, crdmigrate.Options{
		CRDs: []string{"cronjobs.batch.tutorial.kubebuilder.io"},
	}); err != nil {
		panic(err)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		panic(err)
	}
}

// Groups selects every CRD of the operator's API groups; a "*." prefix
// selects the subgroups too. Writes to /status bypass admission webhooks
// that refuse no-op writes.
func ExampleOptions_Selects() {
	opts := crdmigrate.Options{
		Groups:  []string{"*.example.com"},
		WriteTo: migration.WriteToStatus,
	}
	fmt.Println(opts.Selects("widgets.apps.example.com", "apps.example.com"))
	fmt.Println(opts.Selects("widgets.example.org", "example.org"))
	// Output:
	// true
	// false
}
