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
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
)

// Prometheus metrics, on controller-runtime's registry so the manager's
// metrics endpoint serves them. Each is labelled with the CRD's name. Those
// of the migration itself are internal/metrics', shared with the crdmigrate
// controller; the policy's own are here.
var (
	staleStoredVersions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "graduator_crd_stale_stored_versions",
		Help: "Versions in a CRD's status.storedVersions that are no longer its storage version (0 when none).",
	}, []string{"crd"})
	inTreeMigrating = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "graduator_crd_in_tree_migrating",
		Help: "1 while Kubernetes' in-tree StorageVersionMigration migrates a CRD's resource (its StorageMigrating condition), else 0.",
	}, []string{"crd"})
	policyPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "graduator_policy_phase",
		Help: "The phase of each CRDVersionPolicy: 1 for its current phase, 0 for the others.",
	}, []string{"crd", "phase"})
	policyStalled = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "graduator_policy_stalled",
		Help: "1 while a policy's graduation does not move on: a step fails and is retried, or the policy is " +
			"Blocked; the reason label is the Ready condition's reason (see README, Stalls).",
	}, []string{"crd", "reason"})
)

func init() {
	crmetrics.Registry.MustRegister(staleStoredVersions, inTreeMigrating, policyPhase, policyStalled)
}

// forgetPolicy drops the series of a deleted policy, so that a dashboard
// does not show it in its last phase forever.
func forgetPolicy(crd string) {
	policyPhase.DeletePartialMatch(prometheus.Labels{"crd": crd})
	policyStalled.DeletePartialMatch(prometheus.Labels{"crd": crd})
}

// observePolicy sets the gauges that follow a policy's status: whether it is
// stalled, and why. Called with every status written, so the gauge says what
// `kubectl get` says.
func observePolicy(policy *graduatorv1alpha1.CRDVersionPolicy) {
	policyStalled.DeletePartialMatch(prometheus.Labels{"crd": policy.Name})
	if policy.Status.Retries == 0 && policy.Status.Phase != graduatorv1alpha1.PhaseBlocked {
		return
	}
	reason := "Unknown"
	if ready := meta.FindStatusCondition(policy.Status.Conditions, graduatorv1alpha1.ConditionReady); ready != nil {
		reason = ready.Reason
	}
	policyStalled.WithLabelValues(policy.Name, reason).Set(1)
}
