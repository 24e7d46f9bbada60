#!/usr/bin/env bash
# The CLIs the acceptance tests run on, one path a line, building the ones
# that are built from Go modules (cached; see scripts/cli-build.sh and
# scripts/tofu-build.sh). This is the one place that lists them: the
# compatibility table in templates/index.md.tmpl says which versions passed.
#
# Usage: scripts/acc-clis.sh [both|terraform|tofu|matrix]   (default: both)
#   terraform  the terraform on PATH
#   tofu       OpenTofu v1.12.6 (tools/tofu)
#   both       terraform on PATH, Terraform v1.15.0 (tools/terraform), OpenTofu v1.12.6: make test
#   matrix     both, and the oldest versions that build here: Terraform v1.5.7
#              (tools/terraform-oldest) and OpenTofu v1.6.3 (tools/tofu-oldest): make test-matrix
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
which="${1:-both}"
case "$which" in
terraform) command -v terraform ;;
tofu) scripts/tofu-build.sh | tail -n 1 ;;
both | matrix)
	command -v terraform
	scripts/cli-build.sh tools/terraform | tail -n 1
	scripts/tofu-build.sh | tail -n 1
	if [[ "$which" == matrix ]]; then
		scripts/cli-build.sh tools/terraform-oldest | tail -n 1
		scripts/cli-build.sh tools/tofu-oldest | tail -n 1
	fi
	;;
*)
	echo "usage: $0 [both|terraform|tofu|matrix]" >&2
	exit 2
	;;
esac
