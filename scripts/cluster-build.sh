#!/usr/bin/env bash
# Builds etcd, kube-apiserver and kube-controller-manager from Go modules
# (tools/cluster) for the local test control plane; no release binaries are
# downloaded. The last line of stdout is the bin dir, so callers can do
#   export K8S_TF_CLUSTER_BIN="$(scripts/cluster-build.sh)"
# Progress goes to stderr.
#
# Binaries are cached outside the repo, keyed by the sha256 of
# tools/cluster/go.sum, so every worktree/clone shares one build and a version
# bump (which always changes go.sum) gets a fresh directory:
#   ${K8S_TF_CACHE:-$HOME/.cache/terraform-provider-k8s}/cluster-<hash>/bin
# A run that finds all three binaries there builds nothing.
#
# Environment:
#   K8S_TF_CACHE       cache root (default $HOME/.cache/terraform-provider-k8s)
#   K8S_TF_KUBECONFIG  not used here; see scripts/cluster-up.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mod="$root/tools/cluster"

# Must match the k8s.io/kubernetes requirement in tools/cluster/go.mod; the
# module build has no git metadata, so without these the server reports
# v0.0.0-master and clients' version skew checks get confused.
k8s_version="v1.34.3"

hash="$(sha256sum "$mod/go.sum" | cut -c1-16)"
cache="${K8S_TF_CACHE:-$HOME/.cache/terraform-provider-k8s}/cluster-$hash"
bin="$cache/bin"
binaries=(etcd kube-apiserver kube-controller-manager)

have_all() {
	local b
	for b in "${binaries[@]}"; do
		[[ -x "$bin/$b" ]] || return 1
	done
}

if ! have_all; then
	mkdir -p "$bin"
	# Two callers (say, a test run and a demo) may start at once: serialise
	# them so they do not compile the same thing twice on a 2-core machine.
	exec 9>"$cache/.build.lock"
	flock 9
fi

if ! have_all; then
	# GOWORK=off: a go.work at the repo root must not drag this module into the
	# provider's build list. -mod=readonly: go.sum is the cache key, so a build
	# must never rewrite it; a stale go.sum fails loudly instead ("go mod tidy").
	# GOTOOLCHAIN=local: never fetch a toolchain; the go line is kept low enough.
	# CGO_ENABLED=0: static binaries and no C toolchain needed, as upstream
	# builds its server binaries. -buildvcs=false: the repo's git state must
	# not leak into (and change) binaries that do not depend on it.
	export GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0
	minor="${k8s_version#v1.}"
	minor="${minor%%.*}"
	ldflags="-s -w"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.gitCommit="
	done
	declare -A pkgs=(
		[etcd]=./cmd/etcd
		[kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
		[kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
	)
	cd "$mod"
	for b in "${binaries[@]}"; do
		[[ -x "$bin/$b" ]] && continue
		echo "building $b (a cold build of all three takes ~7 min on 2 idle cores)..." >&2
		start=$SECONDS
		# Build to a temp name and rename, so an interrupted build never leaves
		# a file that the completeness check would take for a finished binary.
		go build -trimpath -ldflags "$ldflags" -o "$bin/.$b.tmp" "${pkgs[$b]}"
		mv -f "$bin/.$b.tmp" "$bin/$b"
		echo "built $b in $((SECONDS - start)) s" >&2
	done
else
	echo "cluster binaries up to date in $bin" >&2
fi

echo "$bin"
