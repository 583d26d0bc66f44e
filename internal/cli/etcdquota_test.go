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
	"strings"
	"testing"

	"github.com/graduator/graduator/migration"
)

func TestQuotaOfEtcdsCommandLine(t *testing.T) {
	for _, tc := range []struct {
		name    string
		command string
		want    int64
		known   bool
	}{
		{"kubeadm's and kind's etcd: no quota flag, etcd's default",
			"etcd --advertise-client-urls=https://172.18.0.2:2379 --data-dir=/var/lib/etcd --snapshot-count=10000", migration.DefaultEtcdQuota, true},
		{"a quota set with =", "etcd --data-dir=/var/lib/etcd --quota-backend-bytes=8589934592", 8 << 30, true},
		{"a quota set as the next argument", "etcd --quota-backend-bytes 4294967296 --data-dir=/var/lib/etcd", 4 << 30, true},
		{"a quota of 0 is etcd's default", "etcd --quota-backend-bytes=0", migration.DefaultEtcdQuota, true},
		{"a lowered quota", "etcd -quota-backend-bytes=201326592", 192 << 20, true},
		{"a configuration file: etcd ignores its flags, the quota is not shown",
			"etcd --quota-backend-bytes=8589934592 --config-file=/etc/etcd/etcd.yaml", 0, false},
		{"a value that does not parse", "etcd --quota-backend-bytes=8Gi", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, known := quotaOfCommand(strings.Fields(tc.command))
			if got != tc.want || known != tc.known {
				t.Errorf("quotaOfCommand(%q) = %d, %v; want %d, %v", tc.command, got, known, tc.want, tc.known)
			}
		})
	}
}
