#!/usr/bin/env bash
# Builds a Terraform or OpenTofu CLI from its own Go module, with the
# dependency versions of its own go.mod, for the acceptance tests; no release
# archive is downloaded. The last line of stdout is the path of the binary:
#   TF_ACC_TERRAFORM_PATH="$(scripts/cli-build.sh tools/terraform | tail -n 1)"
# Progress goes to stderr.
#
# Usage: scripts/cli-build.sh <pin dir>
#
# The pin dir (tools/terraform, tools/terraform-oldest, tools/tofu-oldest)
# holds a go.mod requiring github.com/hashicorp/terraform or
# github.com/opentofu/opentofu at the wanted version and a go.sum with its
# checksums. The module is downloaded with the go command, checked against
# that go.sum, copied out of the module cache, and built in the copy. Since
# v1.6 Terraform keeps most remote-state backends (s3, gcs, azurerm, consul,
# ...) in separate Go modules that its module archive does not contain; the
# copy leaves those out of internal/backend/init and of its go.mod. The CLI
# built so has the local, http, inmem, remote and cloud backends, which is all
# the tests use. The CLIs' code is never committed here: it comes from the
# module cache. (tools/tofu, the OpenTofu of make test, is built by
# scripts/tofu-build.sh instead.)
#
# The binary is cached outside the repo, keyed by the sha256 of the pin's
# go.sum (a version bump always changes it; so must a change of this recipe):
#   ${K8S_TF_CACHE:-$HOME/.cache/terraform-provider-k8s}/<cli>-<hash>/bin/<cli>
# A run that finds it there builds nothing.
#
# Environment:
#   K8S_TF_CACHE  cache root (default $HOME/.cache/terraform-provider-k8s)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ $# -eq 1 ]] || { echo "usage: $0 <pin dir>" >&2; exit 2; }
pin="$(cd "$1" && pwd)"
if grep -q '^require github.com/opentofu/opentofu ' "$pin/go.mod"; then
	module=github.com/opentofu/opentofu cli=tofu main=./cmd/tofu
else
	module=github.com/hashicorp/terraform cli=terraform main=.
fi
# As the release builds: version.dev=no makes the CLI report 1.x.y rather
# than 1.x.y-dev (versions without that variable ignore the flag).
ldflags="-s -w -X $module/version.dev=no"

hash="$(sha256sum "$pin/go.sum" | cut -c1-16)"
cache="${K8S_TF_CACHE:-$HOME/.cache/terraform-provider-k8s}/$cli-$hash"
bin="$cache/bin"

if [[ ! -x "$bin/$cli" ]]; then
	mkdir -p "$bin"
	# Concurrent callers wait for one build instead of doing it twice.
	exec 9>"$cache/.build.lock"
	flock 9
fi

if [[ ! -x "$bin/$cli" ]]; then
	# Same environment as scripts/cluster-build.sh and scripts/tofu-build.sh.
	export GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0
	version="$(awk -v m="$module" '$1 == "require" && $2 == m { print $3 }' "$pin/go.mod")"
	want="$(awk -v m="$module" -v v="$version" '$1 == m && $2 == v { print $3 }' "$pin/go.sum")"
	[[ -n "$want" ]] || { echo "$pin/go.sum has no checksum for $module $version" >&2; exit 1; }
	info="$(cd "$pin" && go mod download -json "$module@$version")"
	dir="$(sed -n 's/^\t"Dir": "\(.*\)",$/\1/p' <<<"$info")"
	got="$(sed -n 's/^\t"Sum": "\(.*\)",$/\1/p' <<<"$info")"
	if [[ "$got" != "$want" ]]; then
		echo "$module $version: checksum $got, $pin/go.sum says $want" >&2
		exit 1
	fi

	echo "building $cli $version (a cold build takes ~5-8 min on 2 idle cores)..." >&2
	start=$SECONDS
	src="$cache/src"
	rm -rf "$src"
	cp -R "$dir" "$src"
	chmod -R u+w "$src"
	cd "$src"

	# Separate modules that the archive lacks: replaced by a local directory
	# that is not there. Drop their requirement and replacement, and the
	# backends' imports and registrations in internal/backend/init.
	init=internal/backend/init/init.go
	while read -r path target; do
		[[ -d "$target" ]] && continue
		go mod edit -droprequire="$path" -dropreplace="$path"
		if [[ -f "$init" ]]; then
			alias="$(sed -n "s|^\t\([A-Za-z0-9_]*\) \"$path\"$|\1|p" "$init")"
			if [[ -n "$alias" ]]; then
				sed -i -e "\|^\t$alias \"$path\"$|d" -e "/$alias\.New(/d" "$init"
				echo "  left out $path" >&2
			fi
		fi
	done < <(go mod edit -json | awk '
		/"Old": \{/ { old = 1 } /"New": \{/ { old = 0 }
		/"Path":/ { gsub(/[",]/, "", $2); if (old) p = $2; else if ($2 ~ /^\.\//) print p, $2 }')

	# Temp name + rename: an interrupted build never looks finished.
	go build -trimpath -ldflags "$ldflags" -o "$bin/.$cli.tmp" "$main"
	mv -f "$bin/.$cli.tmp" "$bin/$cli"
	cd "$root"
	rm -rf "$src"
	echo "built $cli $version in $((SECONDS - start)) s" >&2
else
	echo "$cli up to date in $bin" >&2
fi

echo "$bin/$cli"
