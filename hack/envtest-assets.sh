#!/usr/bin/env bash
# Puts kube-apiserver and etcd for envtest into $1 (default bin/k8s).
#
# Order: binaries already there are kept; then setup-envtest, when it can
# download; else both are built from Go modules (hack/envtest/*), which needs
# only the Go module proxy. The first build takes several minutes on 2 cores.
# KUBEBUILDER_ASSETS set by the user is honoured by the Makefile, which does
# not call this script then.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/bin/k8s}
k8s_version=${ENVTEST_K8S_VERSION:-1.36.3}
setup_envtest_version=${SETUP_ENVTEST_VERSION:-v0.25.1}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)

have() { [ -x "$dest/kube-apiserver" ] && [ -x "$dest/etcd" ]; }

if have; then
  exit 0
fi

echo "envtest assets: trying setup-envtest $setup_envtest_version for Kubernetes $k8s_version"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if assets=$(timeout 120 go run "sigs.k8s.io/controller-runtime/tools/setup-envtest@$setup_envtest_version" \
    use "$k8s_version" --bin-dir "$tmp" -p path 2>"$tmp/setup-envtest.log") && [ -n "$assets" ] \
    && [ -x "$assets/kube-apiserver" ] && [ -x "$assets/etcd" ]; then
  cp "$assets/kube-apiserver" "$assets/etcd" "$dest/"
  echo "envtest assets: downloaded into $dest"
  exit 0
fi
echo "envtest assets: setup-envtest cannot download here ($(tail -n 1 "$tmp/setup-envtest.log" 2>/dev/null | cut -c1-160)); building from Go modules"

if [ ! -x "$dest/etcd" ]; then
  echo "envtest assets: building etcd (hack/envtest/etcd)"
  (cd "$root/hack/envtest/etcd" && go build -o "$dest/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "$dest/etcd.tmp" "$dest/etcd"
fi
if [ ! -x "$dest/kube-apiserver" ]; then
  echo "envtest assets: building kube-apiserver (hack/envtest/kube-apiserver); this takes several minutes"
  (cd "$root/hack/envtest/kube-apiserver" && go build -o "$dest/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
  mv "$dest/kube-apiserver.tmp" "$dest/kube-apiserver"
fi
"$dest/etcd" --version | head -n 1
"$dest/kube-apiserver" --version
