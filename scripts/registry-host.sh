#!/usr/bin/env bash
# The default registry host of each CLI given (a name on PATH or a path), one
# line each, in the order given: the <host> of the address <host>/vigie/k8s
# that `source = "vigie/k8s"` means to that CLI, where a filesystem mirror
# must keep the provider for it to find it there. Terraform's and OpenTofu's
# differ.
#
#   scripts/registry-host.sh CLI...
#
# The host is asked of the CLI itself, by `<cli> providers` on a throwaway
# configuration that requires vigie/k8s, so that no registry's name is
# written in the repository. make mirror (scripts/mirror.sh) and make image
# (the image's mirror) use it.
set -euo pipefail

if [ $# -eq 0 ]; then
	echo "usage: $0 CLI..." >&2
	exit 2
fi

probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
cat >"$probe/main.tf" <<'TF'
terraform {
  required_providers {
    k8s = { source = "vigie/k8s" }
  }
}
TF

for cli in "$@"; do
	if ! command -v "$cli" >/dev/null; then
		echo "registry-host: CLI $cli not found" >&2
		exit 1
	fi
	# A relative path is made absolute: the CLI runs in the probe directory.
	path="$cli"
	if [[ "$path" == */* && "$path" != /* ]]; then
		path="$PWD/$path"
	fi
	# `providers` reads the configuration only: no init, no network.
	if ! out="$(cd "$probe" && CHECKPOINT_DISABLE=1 "$path" providers -no-color 2>&1)"; then
		echo "registry-host: $cli providers failed:" >&2
		echo "$out" >&2
		exit 1
	fi
	address="$(grep -o 'provider\[[^]]*/vigie/k8s\]' <<<"$out" | head -n 1)" || true
	host="${address#provider[}"
	host="${host%/vigie/k8s]}"
	if [ -z "$address" ] || [ -z "$host" ] || [[ "$host" == */* ]]; then
		echo "registry-host: $cli providers names no provider[<host>/vigie/k8s]:" >&2
		echo "$out" >&2
		exit 1
	fi
	echo "$host"
done
