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

package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/driver"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/internal/roundtrip"
	"github.com/graduator/graduator/migration"
)

// engineFlags are the flags of the commands that run a migration (migrate
// and prepare), declared and checked once, as clusterFlags are for the
// commands that read clusters.
type engineFlags struct {
	// engine is the tuning the engine takes as it is: --concurrency,
	// --page-size, --qps.
	engine migration.Options
	// etcdQuota is --etcd-quota, etcd's space quota ("8Gi").
	etcdQuota string
	// acceptLoss is --accept-loss, the field paths the conversion may lose.
	acceptLoss []string
	// settleDelay is --settle-delay: how long after the storage switch the
	// run waits where the API servers cannot be checked.
	settleDelay time.Duration
}

func newEngineFlags() engineFlags {
	return engineFlags{
		engine:      migration.Options{Concurrency: migration.DefaultConcurrency, PageSize: migration.DefaultPageSize},
		settleDelay: graduation.DefaultSettleDelay,
	}
}

// addFlags declares the flags; where says where they apply ("" for one
// cluster, " in every cluster" for prepare).
func (f *engineFlags) addFlags(fs *pflag.FlagSet, where string) {
	fs.IntVar(&f.engine.Concurrency, "concurrency", f.engine.Concurrency,
		"Upper bound on writes in flight"+where+"; the number adapts below it to what the API server takes.")
	fs.Int64Var(&f.engine.PageSize, "page-size", f.engine.PageSize, "Objects per LIST page.")
	fs.Float32Var(&f.engine.QPS, "qps", 0, "Optional ceiling on writes per second"+where+
		"; 0: none (API Priority and Fairness and the adaptive limit protect the API server).")
	fs.StringVar(&f.etcdQuota, "etcd-quota", "", "etcd's space quota (its --quota-backend-bytes, such as 8Gi)"+where+
		": the migration then lets the database grow to 3/4 of it between compactions. Not told, it is read where "+
		"the cluster's etcd pods show it, else etcd's default 2Gi is assumed: tell it if your cluster lowered it.")
	fs.StringArrayVar(&f.acceptLoss, "accept-loss", nil, "A field path (such as /status/conditions, /spec/items/*/name) "+
		"the conversion may lose"+where+"; the round-trip proof refuses any other loss. Repeatable.")
	fs.DurationVar(&f.settleDelay, "settle-delay", f.settleDelay, "How long to wait after the storage switch before "+
		"the first write where the API servers can be neither dialled nor counted (the run and the summary say so).")
}

// validate refuses bad values before anything is read.
func (f *engineFlags) validate() error {
	switch {
	case f.engine.Concurrency < 1:
		return fmt.Errorf("--concurrency must be at least 1, got %d", f.engine.Concurrency)
	case f.engine.PageSize < 1:
		return fmt.Errorf("--page-size must be at least 1, got %d", f.engine.PageSize)
	case f.engine.QPS < 0:
		return fmt.Errorf("--qps cannot be negative, got %g", f.engine.QPS)
	case f.settleDelay < 0:
		return fmt.Errorf("--settle-delay cannot be negative, got %s", f.settleDelay)
	}
	if _, err := migration.ParseEtcdQuota(f.etcdQuota); err != nil {
		return fmt.Errorf("--etcd-quota: %w", err)
	}
	for _, path := range f.acceptLoss {
		if !roundtrip.ValidPath(path) {
			return fmt.Errorf("--accept-loss %q is not a field path such as /spec/items/*/name", path)
		}
	}
	return nil
}

// policy is the graduation these flags run on crd: GitOps mode (the CRD's
// own storage version is the target), writing to writeTo, with the settle
// delay and the accepted losses, and etcd's quota from --etcd-quota or,
// not told, from where the cluster's etcd pods show it (and from where).
func (f *engineFlags) policy(ctx context.Context, dyn dynamic.Interface, crd string,
	writeTo migration.WriteTarget) (policy *graduatorv1alpha1.CRDVersionPolicy, quotaFrom string) {
	policy = &graduatorv1alpha1.CRDVersionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: crd, Generation: 1},
		Spec: graduatorv1alpha1.CRDVersionPolicySpec{
			Migration: driver.Settings(writeTo, f.settleDelay, f.acceptLoss)},
	}
	if quota, err := migration.ParseEtcdQuota(f.etcdQuota); err == nil && quota > 0 {
		policy.Spec.Migration.EtcdQuota = resource.NewQuantity(quota, resource.BinarySI)
	} else if quota, from := shownEtcdQuota(ctx, dyn); quota > 0 {
		policy.Spec.Migration.EtcdQuota = resource.NewQuantity(quota, resource.BinarySI)
		quotaFrom = shownQuotaLine(quota, from)
	}
	return policy, quotaFrom
}
