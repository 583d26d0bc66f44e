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

// Package webhook registers the Book conversion webhook with a manager, as
// a kubebuilder project's internal/webhook does.
package webhook

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/graduator/graduator/examples/api/v1"
)

// SetupBookWebhookWithManager serves /convert on the manager's webhook
// server: v1 Books convert through the hub, v2.
func SetupBookWebhookWithManager(mgr ctrl.Manager) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &v1.Book{}).Complete(); err != nil {
		return fmt.Errorf("set up the Book conversion webhook: %w", err)
	}
	return nil
}
