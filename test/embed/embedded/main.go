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

// Command embedded is an operator as its authors write one: a
// controller-runtime manager built from client-go's default scheme, with
// crdmigrate added and nothing else. The embed suite runs it as a process
// of its own, to SIGKILL it in the middle of a migration.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/graduator/graduator/crdmigrate"
)

func main() {
	crds := flag.String("crds", "", "Comma-separated names of the CRDs to graduate.")
	settle := flag.Duration("settle-delay", time.Second, "crdmigrate's SettleDelay.")
	qps := flag.Float64("qps", 0, "crdmigrate's QPS (0: none).")
	quota := flag.Int64("etcd-quota", 0, "crdmigrate's EtcdQuota in bytes (0: not told).")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	// --kubeconfig is controller-runtime's flag.
	if err := run(strings.Split(*crds, ","), *settle, float32(*qps), *quota); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(crds []string, settle time.Duration, qps float32, quota int64) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		// client-go's scheme, without apiextensions.k8s.io: what most
		// operators' main.go starts from.
		Scheme:                 scheme.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	if err := crdmigrate.Add(mgr, crdmigrate.Options{CRDs: crds, SettleDelay: settle, QPS: qps, EtcdQuota: quota}); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
