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
