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

import "github.com/graduator/graduator/graduationtest"

// EtcdStore is the public etcd reader of graduationtest, which CRD authors
// use in their own suites; the operator's suites use the same one.
type EtcdStore = graduationtest.EtcdStore

// NewEtcdStore connects to etcd at endpoint: graduationtest.NewEtcdStore.
func NewEtcdStore(endpoint string) (*EtcdStore, error) { return graduationtest.NewEtcdStore(endpoint) }
