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

package space

import (
	"context"
	"encoding/json"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

const (
	// LeaseNamespace and LeaseName are where every process writing to an
	// etcd finds its ledger: kube-system is in every cluster, whichever
	// namespace the operator runs in and wherever the CLI runs from.
	LeaseNamespace = "kube-system"
	LeaseName      = "graduator-etcd-space"
	// LedgerAnnotation holds the ledger (Shared) as JSON on the Lease.
	LedgerAnnotation = "graduator.io/etcd-space-ledger"
)

// LeaseStore keeps the ledger on a Lease (LeaseNamespace/LeaseName); its
// resourceVersion makes every write a compare-and-swap.
type LeaseStore struct {
	Leases coordinationclient.LeaseInterface
}

// NewLeaseStore is the store of the cluster cfg reaches (nil when cfg
// is nil or no client can be built from it).
func NewLeaseStore(cfg *rest.Config) Store {
	if cfg == nil {
		return nil
	}
	c, err := coordinationclient.NewForConfig(cfg)
	if err != nil {
		return nil
	}
	return LeaseStore{Leases: c.Leases(LeaseNamespace)}
}

// Load reads the ledger; none yet is an empty one of version "".
func (l LeaseStore) Load(ctx context.Context) (Shared, string, error) {
	lease, err := l.Leases.Get(ctx, LeaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Shared{}, "", nil
	}
	if err != nil {
		return Shared{}, "", fmt.Errorf("read the etcd space ledger (Lease %s/%s): %w", LeaseNamespace, LeaseName, err)
	}
	var sh Shared
	if text := lease.Annotations[LedgerAnnotation]; text != "" {
		if err := json.Unmarshal([]byte(text), &sh); err != nil {
			// A ledger no writer can read is started again: the rule then
			// sets the budget from etcd's file, as with no ledger.
			return Shared{}, lease.ResourceVersion, nil
		}
	}
	return sh, lease.ResourceVersion, nil
}

// Save writes the ledger over version, creating the Lease when version is
// "".
func (l LeaseStore) Save(ctx context.Context, sh Shared, version string) error {
	data, err := json.Marshal(sh)
	if err != nil {
		return fmt.Errorf("encode the etcd space ledger: %w", err)
	}
	now := metav1.NewMicroTime(sh.renewed())
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: LeaseName, Namespace: LeaseNamespace, ResourceVersion: version,
			Annotations: map[string]string{LedgerAnnotation: string(data)}},
		Spec: coordinationv1.LeaseSpec{RenewTime: &now, LeaseDurationSeconds: ptr.To(int32(PartTTL.Seconds()))},
	}
	if version == "" {
		_, err = l.Leases.Create(ctx, lease, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// Another process created it first: read it again.
			return apierrors.NewConflict(coordinationv1.Resource("leases"), LeaseName, err)
		}
	} else {
		_, err = l.Leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	if err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("write the etcd space ledger (Lease %s/%s): %w", LeaseNamespace, LeaseName, err)
	}
	return err
}
