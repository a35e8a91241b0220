#!/usr/bin/env bash
# Cilium's policy CRDs for fabrik's tests, from Cilium's Go module (the version pinned here)
# in the module cache, like tests/capi/capi.sh gives Cluster API's.
#
#   cilium.sh crds    print the directory of Cilium's cilium.io/v2 CRDs
#
# Env: GO (go command).
set -euo pipefail

VERSION=v1.20.2

find_go() {
	if [[ -n "${GO:-}" ]]; then echo "$GO"; return; fi
	if command -v go >/dev/null 2>&1; then command -v go; return; fi
	if [[ -x /usr/local/go/bin/go ]]; then echo /usr/local/go/bin/go; return; fi
	echo "cilium.sh: no go toolchain found (set GO=/path/to/go)" >&2
	exit 1
}

cmd_crds() {
	local go dir
	go="$(find_go)"
	# Outside any module: download exactly this version into the module cache (38 MB).
	dir="$(cd /tmp && GOFLAGS=-mod=mod "$go" mod download -json "github.com/cilium/cilium@$VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	local crds="$dir/pkg/k8s/apis/cilium.io/client/crds/v2"
	if [[ -z "$dir" || ! -f "$crds/ciliumnetworkpolicies.yaml" ]]; then
		echo "cilium.sh: github.com/cilium/cilium@$VERSION has no $crds (download failed?)" >&2
		exit 1
	fi
	echo "$crds"
}

case "${1:-}" in
crds) cmd_crds ;;
*)
	echo "usage: cilium.sh crds" >&2
	exit 2
	;;
esac
