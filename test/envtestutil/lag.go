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

package envtestutil

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// WriteAsLaggingAPIServer stores obj under key in etcd as an API server of
// an HA control plane that still takes obj's apiVersion for the storage
// version would: obj read through the API at that version (the API
// converts it), stored as JSON without its resourceVersion, and only if
// etcd still holds the revision it was read at (the API server's own
// compare-and-swap; no other writer's update is lost). It reports whether
// it stored it (false: the object changed since it was read).
func WriteAsLaggingAPIServer(ctx context.Context, c *clientv3.Client, key string, obj *unstructured.Unstructured) (bool, error) {
	rev, err := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		return false, fmt.Errorf("resourceVersion %q of %s: %w", obj.GetResourceVersion(), key, err)
	}
	stored := obj.DeepCopy()
	stored.SetResourceVersion("")
	data, err := json.Marshal(stored.Object)
	if err != nil {
		return false, fmt.Errorf("encode %s: %w", key, err)
	}
	resp, err := c.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, string(data))).
		Commit()
	if err != nil {
		return false, fmt.Errorf("store %s in etcd: %w", key, err)
	}
	return resp.Succeeded, nil
}
