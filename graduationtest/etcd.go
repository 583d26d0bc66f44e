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

package graduationtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	utilversion "k8s.io/apimachinery/pkg/util/version"

	"github.com/graduator/graduator/migration"
)

// EtcdStore reads what the API server stored in etcd, to prove at the
// storage level (not through the API, which converts) which version every
// custom object is encoded in. It is a connection to the control plane's etcd.
type EtcdStore struct {
	client *clientv3.Client
	// Prefix is the API server's --etcd-prefix; "/registry" by default.
	Prefix string
}

// NewEtcdStore connects to etcd at endpoint (such as envtest's
// ControlPlane.Etcd.URL.String()).
func NewEtcdStore(endpoint string) (*EtcdStore, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("connect to etcd at %s: %w", endpoint, err)
	}
	return &EtcdStore{client: c, Prefix: "/registry"}, nil
}

// Close closes the connection.
func (s *EtcdStore) Close() error { return s.client.Close() }

// Client is the etcd client, for tests that need more (compaction, say).
func (s *EtcdStore) Client() *clientv3.Client { return s.client }

// APIVersions returns the apiVersion each object of the resource is stored
// as, keyed by "namespace/name" ("name" for cluster-scoped objects). Custom
// resources are stored as JSON.
func (s *EtcdStore) APIVersions(ctx context.Context, group, plural string) (map[string]string, error) {
	prefix := fmt.Sprintf("%s/%s/%s/", s.Prefix, group, plural)
	resp, err := s.client.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read %s from etcd: %w", prefix, err)
	}
	out := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var obj struct {
			APIVersion string `json:"apiVersion"`
		}
		if err := json.Unmarshal(kv.Value, &obj); err != nil {
			return nil, fmt.Errorf("decode %s: %w", kv.Key, err)
		}
		out[strings.TrimPrefix(string(kv.Key), prefix)] = obj.APIVersion
	}
	return out, nil
}

// Quota is etcd's space quota in bytes, as etcd itself reports it since
// 3.6: its --quota-backend-bytes, or etcd's default 2 GiB when that is not
// set. 0 when etcd does not say (before 3.6).
func (s *EtcdStore) Quota(ctx context.Context) (int64, error) {
	endpoints := s.client.Endpoints()
	if len(endpoints) == 0 {
		return 0, errors.New("read etcd's quota: no endpoint")
	}
	status, err := s.client.Status(ctx, endpoints[0])
	if err != nil {
		return 0, fmt.Errorf("read etcd's quota: %w", err)
	}
	if status.DbSizeQuota > 0 {
		return status.DbSizeQuota, nil
	}
	v, err := utilversion.ParseGeneric(status.Version)
	if err != nil || !v.AtLeast(utilversion.MajorMinor(3, 6)) {
		return 0, nil // an etcd that does not report its quota
	}
	return migration.DefaultEtcdQuota, nil // not set
}

// Counts returns how many objects of the resource are stored in each
// apiVersion.
func (s *EtcdStore) Counts(ctx context.Context, group, plural string) (map[string]int, error) {
	versions, err := s.APIVersions(ctx, group, plural)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, v := range versions {
		counts[v]++
	}
	return counts, nil
}

// Summary describes how many objects are stored in each version, such as
// "2000 objects: 1500 as restaurant.example.com/v1beta1, 500 as .../v1alpha1".
func (s *EtcdStore) Summary(ctx context.Context, group, plural string) string {
	counts, err := s.Counts(ctx, group, plural)
	if err != nil {
		return err.Error()
	}
	total := 0
	for _, n := range counts {
		total += n
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d as %s", counts[k], k))
	}
	if len(parts) == 0 {
		return "no objects"
	}
	return fmt.Sprintf("%d objects: %s", total, strings.Join(parts, ", "))
}
