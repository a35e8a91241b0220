#!/usr/bin/env bash
# The real Kueue controller manager for fabrik's tests, built from Kueue's Go module (the
# version go.mod pins) like tests/controlplane builds Kubernetes. See README.md.
#
#   kueue.sh build     build target/kueue/kueue if it is missing or older than go.mod/go.sum
#   kueue.sh crds      print the directory of Kueue's CRDs (in the module cache)
#   kueue.sh path      print the binary path
#
# Env: GO (go command).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN="$ROOT/target/kueue/kueue"

find_go() {
	if [[ -n "${GO:-}" ]]; then echo "$GO"; return; fi
	if command -v go >/dev/null 2>&1; then command -v go; return; fi
	if [[ -x /usr/local/go/bin/go ]]; then echo /usr/local/go/bin/go; return; fi
	echo "kueue.sh: no go toolchain found (set GO=/path/to/go)" >&2
	exit 1
}

needs_build() {
	[[ -x "$BIN" ]] || return 0
	local f
	for f in "$HERE/go.mod" "$HERE/go.sum"; do
		[[ "$f" -nt "$BIN" ]] && return 0
	done
	return 1
}

cmd_build() {
	if ! needs_build; then
		echo "kueue.sh: $BIN is up to date" >&2
		return 0
	fi
	local go start
	go="$(find_go)"
	mkdir -p "$(dirname "$BIN")"
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$BIN.lock"
		flock 9
		if ! needs_build; then
			exec 9>&-
			return 0
		fi
	fi
	echo "kueue.sh: building $BIN ..." >&2
	start=$(date +%s)
	# The module's own main package: nothing of ours is compiled in.
	(cd "$HERE" && CGO_ENABLED=0 "$go" build -p 2 -trimpath -ldflags="-s -w" -o "$BIN" sigs.k8s.io/kueue/cmd/kueue)
	echo "kueue.sh: build took $(($(date +%s) - start))s" >&2
	exec 9>&- 2>/dev/null || true
}

cmd_crds() {
	local go dir
	go="$(find_go)"
	dir="$(cd "$HERE" && "$go" list -m -f '{{.Dir}}' sigs.k8s.io/kueue)"
	echo "$dir/config/components/crd/bases"
}

case "${1:-}" in
build) cmd_build ;;
crds) cmd_crds ;;
path) echo "$BIN" ;;
*)
	echo "usage: kueue.sh build|crds|path" >&2
	exit 2
	;;
esac
