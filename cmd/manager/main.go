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

// Command manager runs the Graduator operator.
package main

import (
	"flag"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/controllers"
	"github.com/graduator/graduator/internal/serving"
	"github.com/graduator/graduator/migration"
)

// The manager itself needs events to report what it does; each controller
// declares its own permissions. The leader election lease lives in the
// operator's namespace, so its rights are a namespaced Role
// (config/rbac/leader_election_role.yaml, the chart's templates/rbac.yaml),
// not markers: controller-gen would make them cluster-wide.
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// The migration engine reads the API server's apiserver_storage_size_bytes
// (etcd's database size) from its /metrics, to budget what a migration adds
// to etcd between two compactions.
// +kubebuilder:rbac:urls=/metrics,verbs=get
//
// Every process writing to an etcd shares its space budget through one
// ledger, the Lease kube-system/graduator-etcd-space (internal/space). Its
// rights are a Role in kube-system (config/rbac/space-ledger, the chart's
// templates/rbac.yaml), not markers: controller-gen would make them
// cluster-wide.

// The secure metrics endpoint asks the API server who a scraper is and whether
// it may get /metrics.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

func main() {
	metricsOpts := serving.DefaultMetrics()
	var (
		probeAddr   string
		leaderElect bool
		leaderNS    string
		workers     int
		pprofAddr   string
		etcdQuota   string
	)
	metricsOpts.BindFlags(flag.CommandLine)
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081",
		"The address the health (/healthz) and readiness (/readyz) probes bind to (plain HTTP).")
	flag.BoolVar(&leaderElect, "leader-elect", false,
		"Elect a leader before reconciling, so that only one replica migrates at a time.")
	flag.StringVar(&leaderNS, "leader-election-namespace", "",
		"The namespace of the leader election lease; defaults to the pod's namespace when running in a cluster.")
	flag.IntVar(&workers, "max-concurrent-graduations", 2,
		"How many CRDs graduate (migrate) at the same time.")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "",
		"The address Go's pprof endpoints (/debug/pprof) bind to, for profiling; empty or \"0\" disables them.")
	flag.StringVar(&etcdQuota, "etcd-quota", "",
		"etcd's space quota (its --quota-backend-bytes), such as 8Gi, for policies that set no spec.migration.etcdQuota: "+
			"a migration then lets etcd's database grow to 3/4 of it. Empty: not told, etcd's default 2Gi is assumed (a cluster that lowered its quota must tell it).")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	utilruntime.Must(graduatorv1alpha1.AddToScheme(scheme))

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme,
		Cache:                   controllers.CacheOptions(),
		Metrics:                 metricsOpts.ServerOptions(),
		HealthProbeBindAddress:  probeAddr,
		PprofBindAddress:        pprofAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "graduator.graduator.io",
		LeaderElectionNamespace: leaderNS,
		// Releasing the lease on SIGTERM lets a new replica take over at once
		// instead of waiting for the lease to expire. Safe because main
		// returns right after the manager stops.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		log.Error(err, "unable to create the manager")
		os.Exit(1)
	}

	quota, err := migration.ParseEtcdQuota(etcdQuota)
	if err != nil {
		log.Error(err, "invalid --etcd-quota")
		os.Exit(1)
	}
	if err := controllers.Setup(mgr, controllers.Options{MaxConcurrentGraduations: workers, EtcdQuota: quota}); err != nil {
		log.Error(err, "unable to set up the controllers")
		os.Exit(1)
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "unable to add the health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "unable to add the readiness check")
		os.Exit(1)
	}

	log.Info("starting the manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "the manager stopped with an error")
		os.Exit(1)
	}
	log.Info("the manager stopped")
}
