#!/usr/bin/env bash
# Puts kube-apiserver and etcd of one Kubernetes release for envtest into $1
# (default bin/k8s/<release>), and kube-controller-manager too when
# ENVTEST_CONTROLLER_MANAGER=true. The release is ENVTEST_K8S_VERSION (default
# 1.37.2; `make ... K8S=1.30.14` sets it).
#
# Each release has a directory of its own, so several sit side by side and
# building one never throws another away. A directory is trusted only for the
# release its .release stamp names, and binaries already there are kept: a
# second run costs nothing. Then setup-envtest, when it can download; else each
# binary is built from Go modules, which needs only the Go module proxy:
# kube-apiserver and kube-controller-manager from
# hack/envtest/kube-apiserver-<release> (hack/envtest/new-release.sh writes one
# for a new release), etcd from hack/envtest/etcd, built once and linked into
# every release's directory. A first build takes several minutes on 2 cores.
# KUBEBUILDER_ASSETS set by the user is honoured by the Makefile, which does
# not call this script then.
#
# No pipe here ends early: under pipefail a reader that stops after one line
# (head, grep -q) kills its writer with SIGPIPE and fails the script on
# some runs only (test/scripts checks the cold path with stub binaries).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
k8s_version=${ENVTEST_K8S_VERSION:-1.37.2}
dest=${1:-$root/bin/k8s/$k8s_version}
setup_envtest_version=${SETUP_ENVTEST_VERSION:-v0.25.1}
controller_manager=${ENVTEST_CONTROLLER_MANAGER:-false}
go=${GO:-go}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
store=$(dirname "$dest")
stamp="$dest/.release"
module="$root/hack/envtest/kube-apiserver-$k8s_version"
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' "$root/hack/envtest/etcd/go.mod")

wanted=(kube-apiserver etcd)
if [ "$controller_manager" = true ]; then
  wanted+=(kube-controller-manager)
fi

# Before releases had directories of their own, bin/k8s held one release's
# binaries directly: they move into their release's directory rather than be
# built again.
if [ "$(cat "$store/.release" 2>/dev/null)" = "$k8s_version" ] && [ "$dest" = "$store/$k8s_version" ]; then
  for name in kube-apiserver etcd kube-controller-manager; do
    if [ -x "$store/$name" ] && [ ! -e "$dest/$name" ]; then
      mv "$store/$name" "$dest/$name"
    fi
  done
  mv "$store/.release" "$stamp"
  echo "$etcd_version" >"$dest/.etcd"
  echo "envtest assets: moved Kubernetes $k8s_version from $store into $dest"
fi

# A directory holding another release (DEST given by hand, or a stamp from
# an interrupted run) is emptied: tests must run the release they name.
held=$(cat "$stamp" 2>/dev/null || echo "an unknown release")
if [ "$held" != "$k8s_version" ] && { [ -e "$dest/kube-apiserver" ] || [ -e "$dest/etcd" ]; }; then
  echo "envtest assets: $dest holds Kubernetes $held, want $k8s_version; replacing it"
  rm -f "$dest/kube-apiserver" "$dest/etcd" "$dest/kube-controller-manager" "$dest/.etcd"
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
  echo "envtest assets: Kubernetes $k8s_version in $dest (cached)"
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
    echo "setup-envtest" >"$dest/.etcd"
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
  if [ ! -f "$dir/go.mod" ]; then
    echo "envtest assets: no module builds Kubernetes $k8s_version here (${dir#"$root"/} is missing);" \
      "write it with hack/envtest/new-release.sh $k8s_version and commit it" >&2
    exit 1
  fi
  echo "envtest assets: building $name for Kubernetes $k8s_version (${dir#"$root"/}); this takes a few minutes the first time"
  (cd "$dir" && "$go" build -ldflags="$flags" -o "$dest/$name.tmp" "$pkg")
  mv "$dest/$name.tmp" "$dest/$name"
}

# etcd does not depend on the Kubernetes release: one built from
# hack/envtest/etcd for another release is linked (or copied) rather than
# built again.
if [ ! -x "$dest/etcd" ]; then
  for other in "$store"/*/; do
    other=${other%/}
    if [ "$other" != "$dest" ] && [ -x "$other/etcd" ] && [ "$(cat "$other/.etcd" 2>/dev/null)" = "$etcd_version" ]; then
      ln -f "$other/etcd" "$dest/etcd" 2>/dev/null || cp "$other/etcd" "$dest/etcd"
      echo "envtest assets: etcd $etcd_version taken from $other"
      break
    fi
  done
fi
if [ ! -x "$dest/etcd" ]; then
  build etcd "$root/hack/envtest/etcd" go.etcd.io/etcd/server/v3
fi
[ -e "$dest/.etcd" ] || echo "$etcd_version" >"$dest/.etcd"
build kube-apiserver "$module" k8s.io/kubernetes/cmd/kube-apiserver "$ldflags"
if [ "$controller_manager" = true ]; then
  build kube-controller-manager "$module" k8s.io/kubernetes/cmd/kube-controller-manager "$ldflags"
fi
echo "$k8s_version" >"$stamp"

first_line "$dest/etcd" --version
first_line "$dest/kube-apiserver" --version
if [ "$controller_manager" = true ]; then
  first_line "$dest/kube-controller-manager" --version
fi
