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
	"sigs.k8s.io/controller-runtime/pkg/metrics"
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
	stepErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "graduator_step_errors_total",
		Help: "Failed attempts of a graduation step, by step and by the reason set on the policy's Ready condition.",
	}, []string{"crd", "step", "reason"})
)

func init() {
	metrics.Registry.MustRegister(objectsRewritten, objectsSkipped, objectsFailed, migrationDuration,
		staleStoredVersions, policyPhase, stepErrors, migrationWriters, migrationsRunning)
}

// forgetPolicy drops the series of a deleted policy, so that a dashboard
// does not show it in its last phase forever.
func forgetPolicy(crd string) {
	policyPhase.DeletePartialMatch(prometheus.Labels{"crd": crd})
}

// MigrationsRunning returns how many storage migrations run now.
func MigrationsRunning() int {
	m := &dto.Metric{}
	if err := migrationsRunning.Write(m); err != nil {
		return 0
	}
	return int(m.GetGauge().GetValue())
}
