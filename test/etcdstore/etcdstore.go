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

// Package etcdstore reads what the API server stored in etcd. It is kept for
// existing callers: the reader now lives in test/envtestutil (EtcdStore),
// with the suites' other shared helpers; use that in new code.
package etcdstore

import "github.com/graduator/graduator/test/envtestutil"

// Store is envtestutil.EtcdStore.
type Store = envtestutil.EtcdStore

// New is envtestutil.NewEtcdStore: it connects to etcd at endpoint (such as
// envtest's ControlPlane.Etcd.URL.String()).
func New(endpoint string) (*Store, error) { return envtestutil.NewEtcdStore(endpoint) }
