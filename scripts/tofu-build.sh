#!/usr/bin/env bash
# Builds the OpenTofu CLI from Go modules (tools/tofu) for acceptance tests
# and demos; no release archive is downloaded. The last line of stdout is the
# path of the tofu binary:
#   TF_ACC_TERRAFORM_PATH="$(scripts/tofu-build.sh | tail -n 1)"
# Progress goes to stderr.
#
# The binary is cached outside the repo, keyed by the sha256 of
# tools/tofu/go.sum (a version bump always changes it):
#   ${K8S_TF_CACHE:-$HOME/.cache/terraform-provider-k8s}/tofu-<hash>/bin/tofu
# A run that finds it there builds nothing.
#
# tofu prints a warning on stdout when TF_CLI_CONFIG_FILE names a missing
# file; point it at an existing (possibly empty) file when scripting it.
#
# Environment:
#   K8S_TF_CACHE  cache root (default $HOME/.cache/terraform-provider-k8s)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mod="$root/tools/tofu"

hash="$(sha256sum "$mod/go.sum" | cut -c1-16)"
cache="${K8S_TF_CACHE:-$HOME/.cache/terraform-provider-k8s}/tofu-$hash"
bin="$cache/bin"

if [[ ! -x "$bin/tofu" ]]; then
	mkdir -p "$bin"
	# Concurrent callers wait for one build instead of doing it twice.
	exec 9>"$cache/.build.lock"
	flock 9
fi

if [[ ! -x "$bin/tofu" ]]; then
	# Same environment as scripts/cluster-build.sh, and the flags of
	# OpenTofu's release build (.goreleaser.yaml): static, stripped, and
	# version.dev=no so that it reports 1.x.y rather than 1.x.y-dev.
	export GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0
	echo "building tofu (a cold build takes ~4-5 min on 2 idle cores)..." >&2
	start=$SECONDS
	cd "$mod"
	# Temp name + rename: an interrupted build never looks finished.
	go build -trimpath -ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" \
		-o "$bin/.tofu.tmp" github.com/opentofu/opentofu/cmd/tofu
	mv -f "$bin/.tofu.tmp" "$bin/tofu"
	echo "built tofu in $((SECONDS - start)) s" >&2
else
	echo "tofu up to date in $bin" >&2
fi

echo "$bin/tofu"
