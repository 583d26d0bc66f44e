#!/usr/bin/env bash
# Writes hack/envtest/kube-apiserver-<release>/: the module that builds
# kube-apiserver and kube-controller-manager of one Kubernetes release from
# Go modules. k8s.io/kubernetes points its staging modules at ./staging paths
# that exist only in its own repository; each one is replaced here with the
# published module of the same release (v0.<minor>.<patch>), the list read
# from that release's own go.mod. Needs the Go module proxy.
#
#   hack/envtest/new-release.sh 1.34.12
set -euo pipefail

release=${1:?usage: $0 RELEASE (say 1.34.12)}
go=${GO:-go}
here=$(cd "$(dirname "$0")" && pwd)
dir=$here/kube-apiserver-$release
staging=v0.${release#*.}

mkdir -p "$dir"
gomod=$(cd "$dir" && GOFLAGS=-mod=mod "$go" mod download -json "k8s.io/kubernetes@v$release")
gomod=${gomod#*\"GoMod\": \"}
gomod=${gomod%%\"*}

{
  echo "// Builds kube-apiserver and kube-controller-manager of Kubernetes $release for"
  echo "// envtest from Go modules (written by hack/envtest/new-release.sh $release)."
  echo "module github.com/graduator/graduator/hack/envtest/kube-apiserver-$release"
  echo
  echo "go $(awk '$1 == "go" {print $2; exit}' "$gomod")"
  echo
  echo "require k8s.io/kubernetes v$release"
  echo
  echo "replace ("
  awk -v v="$staging" '$2 == "=>" && $3 ~ /^\.\/staging\// {printf "\t%s => %s %s\n", $1, $1, v}' "$gomod"
  echo ")"
  echo
  echo "tool ("
  echo "	k8s.io/kubernetes/cmd/kube-apiserver"
  echo "	k8s.io/kubernetes/cmd/kube-controller-manager"
  echo ")"
} >"$dir/go.mod"
(cd "$dir" && "$go" mod tidy)
echo "wrote $dir"
