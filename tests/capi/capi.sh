#!/usr/bin/env bash
# Cluster API's CRDs for fabrik's tests, from Cluster API's Go module (the version pinned
# here) in the module cache, like tests/kueue/kueue.sh gives Kueue's.
#
#   capi.sh crds      print the directory of Cluster API's core CRDs (config/crd/bases)
#
# Env: GO (go command).
set -euo pipefail

VERSION=v1.11.3

find_go() {
	if [[ -n "${GO:-}" ]]; then echo "$GO"; return; fi
	if command -v go >/dev/null 2>&1; then command -v go; return; fi
	if [[ -x /usr/local/go/bin/go ]]; then echo /usr/local/go/bin/go; return; fi
	echo "capi.sh: no go toolchain found (set GO=/path/to/go)" >&2
	exit 1
}

cmd_crds() {
	local go dir
	go="$(find_go)"
	# Outside any module: download exactly this version into the module cache.
	dir="$(cd /tmp && GOFLAGS=-mod=mod "$go" mod download -json "sigs.k8s.io/cluster-api@$VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	if [[ -z "$dir" || ! -d "$dir/config/crd/bases" ]]; then
		echo "capi.sh: sigs.k8s.io/cluster-api@$VERSION has no config/crd/bases (download failed?)" >&2
		exit 1
	fi
	echo "$dir/config/crd/bases"
}

case "${1:-}" in
crds) cmd_crds ;;
*)
	echo "usage: capi.sh crds" >&2
	exit 2
	;;
esac
