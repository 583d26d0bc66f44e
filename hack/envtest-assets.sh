#!/usr/bin/env bash
# Puts kube-apiserver and etcd for envtest into $1 (default bin/k8s), and
# kube-controller-manager too when ENVTEST_CONTROLLER_MANAGER=true.
#
# Order: binaries already there are kept when they were made for the same
# Kubernetes release (bin/k8s/.release records it); then setup-envtest, when it
# can download; else each binary is built from Go modules (hack/envtest/*), which
# needs only the Go module proxy. The first build takes several minutes on 2
# cores. KUBEBUILDER_ASSETS set by the user is honoured by the Makefile, which
# does not call this script then.
#
# No pipe here ends early: under pipefail a reader that stops after one line
# (head, grep -q) kills its writer with SIGPIPE and fails the script on
# some runs only (test/scripts checks the cold path with stub binaries).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/bin/k8s}
k8s_version=${ENVTEST_K8S_VERSION:-1.37.2}
setup_envtest_version=${SETUP_ENVTEST_VERSION:-v0.25.1}
controller_manager=${ENVTEST_CONTROLLER_MANAGER:-false}
go=${GO:-go}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
stamp="$dest/.release"

wanted=(kube-apiserver etcd)
if [ "$controller_manager" = true ]; then
  wanted+=(kube-controller-manager)
fi

# Binaries of another release are thrown away: tests must run the Kubernetes
# our client libraries speak, not whatever an earlier checkout left in bin/.
# Binaries without a stamp come from a checkout older than the stamp.
held=$(cat "$stamp" 2>/dev/null || echo "an unknown release")
if [ "$held" != "$k8s_version" ] && { [ -e "$dest/kube-apiserver" ] || [ -e "$dest/etcd" ]; }; then
  echo "envtest assets: $dest holds Kubernetes $held, want $k8s_version; replacing it"
  rm -f "$dest/kube-apiserver" "$dest/etcd" "$dest/kube-controller-manager"
fi

missing() {
  local name
  for name in "${wanted[@]}"; do
    [ -x "$dest/$name" ] || return 0
  done
  return 1
}

first_line() {
  local out
  out=$("$@")
  printf '%s\n' "${out%%$'\n'*}"
}

if ! missing; then
  echo "$k8s_version" >"$stamp"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# setup-envtest ships kube-apiserver and etcd, never kube-controller-manager.
if [ ! -x "$dest/kube-apiserver" ] || [ ! -x "$dest/etcd" ]; then
  echo "envtest assets: trying setup-envtest $setup_envtest_version for Kubernetes $k8s_version"
  if assets=$(timeout 120 "$go" run "sigs.k8s.io/controller-runtime/tools/setup-envtest@$setup_envtest_version" \
      use "$k8s_version" --bin-dir "$tmp" -p path 2>"$tmp/setup-envtest.log") && [ -n "$assets" ] \
      && [ -x "$assets/kube-apiserver" ] && [ -x "$assets/etcd" ]; then
    cp "$assets/kube-apiserver" "$assets/etcd" "$dest/"
    echo "envtest assets: downloaded into $dest"
  else
    reason=$(tail -n 1 "$tmp/setup-envtest.log" 2>/dev/null || true)
    echo "envtest assets: setup-envtest cannot download here (${reason:0:160}); building from Go modules"
  fi
fi

# The Kubernetes binaries report their release (/version, --version) as a
# release build would; a plain module build would say v0.0.0-master.
minor=${k8s_version#*.}
minor=${minor%%.*}
ldflags="-X k8s.io/component-base/version.gitVersion=v$k8s_version -X k8s.io/component-base/version.gitMajor=1"
ldflags+=" -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"

build() { # build NAME MODULE-DIR PACKAGE [LDFLAGS]
  local name=$1 dir=$2 pkg=$3 flags=${4:-}
  [ -x "$dest/$name" ] && return 0
  echo "envtest assets: building $name for Kubernetes $k8s_version (hack/envtest/$dir); this takes a few minutes the first time"
  (cd "$root/hack/envtest/$dir" && "$go" build -ldflags="$flags" -o "$dest/$name.tmp" "$pkg")
  mv "$dest/$name.tmp" "$dest/$name"
}

build etcd etcd go.etcd.io/etcd/server/v3
build kube-apiserver kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$ldflags"
if [ "$controller_manager" = true ]; then
  build kube-controller-manager kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager "$ldflags"
fi
echo "$k8s_version" >"$stamp"

first_line "$dest/etcd" --version
first_line "$dest/kube-apiserver" --version
if [ "$controller_manager" = true ]; then
  first_line "$dest/kube-controller-manager" --version
fi
