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
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/migration"
)

// Prometheus metrics, on controller-runtime's registry so the manager's
// metrics endpoint serves them. Each is labelled with the CRD's name.
var (
	objectsRewritten = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "graduator_objects_rewritten_total",
		Help: "Objects rewritten in the storage version by the storage migration.",
	}, []string{"crd"})
	objectsSkipped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "graduator_objects_skipped_total",
		Help: "Objects the storage migration skipped: deleted or written by someone else meanwhile, or already migrated.",
	}, []string{"crd"})
	objectsFailed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "graduator_objects_failed_total",
		Help: "Objects the storage migration could not rewrite.",
	}, []string{"crd"})
	migrationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "graduator_migration_duration_seconds",
		Help:    "Duration of complete storage migration runs.",
		Buckets: prometheus.ExponentialBuckets(0.5, 2, 16),
	}, []string{"crd"})
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
	migrationWriters = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "graduator_migration_writers",
		Help: "The adaptive limit on writes in flight of the running migration.",
	}, []string{"crd"})
	migrationsRunning = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "graduator_migrations_running",
		Help: "Storage migrations running now, across every policy (at most --max-concurrent-graduations).",
	})
	migrationProgress = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "graduator_migration_progress_ratio",
		Help: "How far the running or last migration of a CRD got: objects done (rewritten, skipped or failed) " +
			"over objects listed plus the API server's estimate of those not listed yet; 1 when complete.",
	}, []string{"crd"})
	policyStalled = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "graduator_policy_stalled",
		Help: "1 while a policy's graduation does not move on: a step fails and is retried, or the policy is " +
			"Blocked; the reason label is the Ready condition's reason (see README, Stalls).",
	}, []string{"crd", "reason"})
	stepErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "graduator_step_errors_total",
		Help: "Failed attempts of a graduation step, by step and by the reason set on the policy's Ready condition.",
	}, []string{"crd", "step", "reason"})
)

func init() {
	metrics.Registry.MustRegister(objectsRewritten, objectsSkipped, objectsFailed, migrationDuration,
		staleStoredVersions, inTreeMigrating, policyPhase, stepErrors, migrationWriters, migrationsRunning, migrationProgress,
		policyStalled)
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

// observeProgress sets the progress gauge of a CRD's migration.
func observeProgress(crd string, p migration.Progress) {
	done := float64(p.Rewritten + p.Skipped + p.Failed)
	total := float64(p.Listed + max(p.Remaining, 0))
	if total == 0 {
		migrationProgress.WithLabelValues(crd).Set(0)
		return
	}
	migrationProgress.WithLabelValues(crd).Set(min(done/total, 1))
}

// MigrationsRunning returns how many storage migrations run now.
func MigrationsRunning() int {
	m := &dto.Metric{}
	if err := migrationsRunning.Write(m); err != nil {
		return 0
	}
	return int(m.GetGauge().GetValue())
}
