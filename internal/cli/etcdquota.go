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
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/graduator/graduator/migration"
)

// etcdPodSelector selects the etcd static pods of a kubeadm control plane
// (kind's too): kubeadm labels them so.
const etcdPodSelector = "component=etcd,tier=control-plane"

var podsResource = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// shownEtcdQuota reads etcd's quota where a kubeadm control plane shows
// it: the command line of its etcd static pods in kube-system. The caller
// of the CLI, often the cluster's admin, may read them; the operator's
// chart grants no such right, so only the CLI looks. It returns 0 when
// the cluster does not show the quota (no such pods, no right to read
// them, a pod configured from a file) and else the smallest of the pods'
// quotas, with where it was read.
func shownEtcdQuota(ctx context.Context, dyn dynamic.Interface) (int64, string) {
	pods, err := dyn.Resource(podsResource).Namespace("kube-system").List(ctx, metav1.ListOptions{LabelSelector: etcdPodSelector})
	if err != nil || len(pods.Items) == 0 {
		return 0, ""
	}
	var quota int64
	var from []string
	for _, pod := range pods.Items {
		q, ok := quotaOfPod(pod)
		if !ok {
			return 0, ""
		}
		if quota == 0 || q < quota {
			quota = q
		}
		from = append(from, "kube-system/"+pod.GetName())
	}
	return quota, "the command line of " + strings.Join(from, ", ")
}

// quotaOfPod is the quota of the etcd container of an etcd static pod.
func quotaOfPod(pod unstructured.Unstructured) (int64, bool) {
	containers, _, _ := unstructured.NestedSlice(pod.Object, "spec", "containers")
	for _, c := range containers {
		container, ok := c.(map[string]any)
		if !ok || container["name"] != "etcd" {
			continue
		}
		command, _, _ := unstructured.NestedStringSlice(container, "command")
		args, _, _ := unstructured.NestedStringSlice(container, "args")
		return quotaOfCommand(append(command, args...))
	}
	return 0, false
}

// quotaOfCommand reads etcd's quota from its command line: its
// --quota-backend-bytes, else etcd's default; not known when etcd reads a
// configuration file (etcd then ignores its flags) or the value does not
// parse.
func quotaOfCommand(args []string) (int64, bool) {
	flags := map[string]string{}
	for i, arg := range args {
		if !strings.HasPrefix(arg, "-") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			value = args[i+1]
		}
		flags[name] = value
	}
	if _, ok := flags["config-file"]; ok {
		return 0, false
	}
	value, ok := flags["quota-backend-bytes"]
	if !ok {
		return migration.DefaultEtcdQuota, true
	}
	q, err := strconv.ParseInt(value, 10, 64)
	switch {
	case err != nil || q < 0:
		return 0, false
	case q == 0: // etcd's default
		return migration.DefaultEtcdQuota, true
	}
	return q, true
}

// shownQuotaLine is what the CLI prints when it read the quota.
func shownQuotaLine(quota int64, from string) string {
	return fmt.Sprintf("etcd's quota: %s, from %s (--etcd-quota overrides it)", resource.NewQuantity(quota, resource.BinarySI), from)
}
