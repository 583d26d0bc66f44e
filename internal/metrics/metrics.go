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

// Package metrics holds the Prometheus collectors of a storage migration,
// shared by every caller of the engine in a manager: the operator's policy
// reconciler and the crdmigrate controller that operators embed. They are
// registered once, on controller-runtime's registry, so the manager's
// metrics endpoint serves them whichever of the two runs; a second copy
// would fail to register under the same names.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The migration's collectors, each labelled with the CRD's name.
var (
	ObjectsRewritten = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "graduator_objects_rewritten_total",
		Help: "Objects rewritten in the storage version by the storage migration.",
	}, []string{"crd"})
	ObjectsSkipped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "graduator_objects_skipped_total",
		Help: "Objects the storage migration skipped: deleted or written by someone else meanwhile, or already migrated.",
	}, []string{"crd"})
	ObjectsFailed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "graduator_objects_failed_total",
		Help: "Objects the storage migration could not rewrite.",
	}, []string{"crd"})
	MigrationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "graduator_migration_duration_seconds",
		Help:    "Duration of complete storage migration runs.",
		Buckets: prometheus.ExponentialBuckets(0.5, 2, 16),
	}, []string{"crd"})
	MigrationWriters = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "graduator_migration_writers",
		Help: "The adaptive limit on writes in flight of the running migration.",
	}, []string{"crd"})
	MigrationsRunning = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "graduator_migrations_running",
		Help: "Storage migrations running now, across every policy (at most --max-concurrent-graduations).",
	})
	MigrationProgress = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "graduator_migration_progress_ratio",
		Help: "How far the running or last migration of a CRD got: objects done (rewritten, skipped or failed) " +
			"over objects listed plus the API server's estimate of those not listed yet; 1 when complete.",
	}, []string{"crd"})
	StepErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "graduator_step_errors_total",
		Help: "Failed attempts of a graduation step, by step and by the reason set on the policy's Ready condition.",
	}, []string{"crd", "step", "reason"})
)

func init() {
	crmetrics.Registry.MustRegister(ObjectsRewritten, ObjectsSkipped, ObjectsFailed, MigrationDuration,
		StepErrors, MigrationWriters, MigrationsRunning, MigrationProgress)
}

// Recorder records a graduation on the collectors above: the driver's
// Metrics for the doors that run in a manager (the operator, crdmigrate).
type Recorder struct{}

// RunStarted counts a migration run of crd as running.
func (Recorder) RunStarted(string) { MigrationsRunning.Inc() }

// RunEnded counts a migration run of crd as no longer running.
func (Recorder) RunEnded(string) { MigrationsRunning.Dec() }

// Counted adds the objects done since the last call. Adding 0 still
// creates the series: a counter that exists from the first page on reads 0
// in rate() and in alerts instead of being absent.
func (Recorder) Counted(crd string, rewritten, skipped, failed int64) {
	ObjectsRewritten.WithLabelValues(crd).Add(float64(max(rewritten, 0)))
	ObjectsSkipped.WithLabelValues(crd).Add(float64(max(skipped, 0)))
	ObjectsFailed.WithLabelValues(crd).Add(float64(max(failed, 0)))
}

// Progressed sets the writers in flight and the fraction of the run done.
func (Recorder) Progressed(crd string, writers int, fraction float64) {
	MigrationWriters.WithLabelValues(crd).Set(float64(writers))
	MigrationProgress.WithLabelValues(crd).Set(fraction)
}

// Completed observes the duration of a complete run.
func (Recorder) Completed(crd string, took time.Duration) {
	MigrationDuration.WithLabelValues(crd).Observe(took.Seconds())
}

// StepFailed counts a failed attempt of a step, with the reason it stalled.
func (Recorder) StepFailed(crd, step, reason string) {
	StepErrors.WithLabelValues(crd, step, reason).Inc()
}

// Running returns how many storage migrations run now.
func Running() int {
	m := &dto.Metric{}
	if err := MigrationsRunning.Write(m); err != nil {
		return 0
	}
	return int(m.GetGauge().GetValue())
}
