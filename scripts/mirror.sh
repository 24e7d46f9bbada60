#!/usr/bin/env bash
# make mirror: lays out a build of the provider as a local provider mirror,
# so that `terraform init` and `tofu init` install vigie/k8s from it as they
# install any provider, with a lock file, a backend and other providers.
#
#   scripts/mirror.sh <provider binary> <version> <mirror directory> [CLI...]
#
# The mirror directory is ~/.terraform.d/plugins by default (make mirror), an
# implied local mirror directory that Terraform and OpenTofu both read when
# their CLI configuration has no provider_installation block; any other
# directory is for a filesystem_mirror block (README.md, "Install").
#
# A provider's address is <host>/vigie/k8s, where <host> is the default
# registry of the CLI that reads `source = "vigie/k8s"`, and Terraform's and
# OpenTofu's differ. The host is asked of each CLI (named, else terraform and
# tofu where found on PATH) by scripts/registry-host.sh, so that no
# registry's name is written here.
# The binary goes to <dir>/<host>/vigie/k8s/<version>/<os>_<arch>/
# terraform-provider-k8s_v<version> (the unpacked layout) for each host.
set -euo pipefail

if [ $# -lt 3 ]; then
	echo "usage: $0 <provider binary> <version> <mirror directory> [CLI...]" >&2
	exit 2
fi
binary=$1 version=$2 dir=$3
shift 3

clis=("$@")
if [ ${#clis[@]} -eq 0 ]; then
	for name in terraform tofu; do
		if command -v "$name" >/dev/null; then clis+=("$name"); fi
	done
	if [ ${#clis[@]} -eq 0 ]; then
		echo "mirror: neither terraform nor tofu is on PATH: name the CLIs that will use the mirror (make mirror MIRROR_CLIS=/path/to/terraform)" >&2
		exit 1
	fi
fi
if [ ! -x "$binary" ]; then
	echo "mirror: $binary is not an executable provider binary (make build makes it)" >&2
	exit 1
fi
platform="$(go env GOOS)_$(go env GOARCH)"

# The hosts, each once, asked of each CLI (a failure stops here).
asked="$("$(dirname "$0")/registry-host.sh" "${clis[@]}")"
hosts=()
while read -r host; do
	case " ${hosts[*]:-} " in *" $host "*) ;; *) hosts+=("$host") ;; esac
done <<<"$asked"

for host in "${hosts[@]}"; do
	target="$dir/$host/vigie/k8s/$version/$platform"
	mkdir -p "$target"
	# A new file renamed over the old one: a CLI that runs meanwhile sees one
	# or the other, never half of it.
	cp "$binary" "$target/.terraform-provider-k8s_v$version.tmp"
	chmod 0755 "$target/.terraform-provider-k8s_v$version.tmp"
	mv -f "$target/.terraform-provider-k8s_v$version.tmp" "$target/terraform-provider-k8s_v$version"
	echo "mirror: $target/terraform-provider-k8s_v$version ($host/vigie/k8s $version)"
done
