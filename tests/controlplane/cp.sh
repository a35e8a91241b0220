#!/usr/bin/env bash
# Test-only Kubernetes control plane for fabrik (etcd + kube-apiserver +
# kube-controller-manager + kube-scheduler, one Go binary). See README.md.
#
#   cp.sh build        build the binary if it is missing or older than its sources
#   cp.sh up DIR       build if needed, start, wait for READY, print DIR/kubeconfig
#   cp.sh down DIR     stop what `up DIR` started
#   cp.sh path         print the binary path
#
# Env: FABRIK_CONTROLPLANE_BIN (binary path), GO (go command),
#      FABRIK_CP_PORT (apiserver port for `up`, default: a free one),
#      FABRIK_CP_KCM_CONTROLLERS (KCM --controllers, default "*"),
#      FABRIK_CP_KEEP=1 (`up` restarts on DIR's etcd data, certs and tokens: a restart
#      as clients see one; use it with FABRIK_CP_PORT so the address stays the same).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN="${FABRIK_CONTROLPLANE_BIN:-$ROOT/target/controlplane/fabrik-controlplane}"
UP_TIMEOUT=120

find_go() {
	if [[ -n "${GO:-}" ]]; then echo "$GO"; return; fi
	if command -v go >/dev/null 2>&1; then command -v go; return; fi
	if [[ -x /usr/local/go/bin/go ]]; then echo /usr/local/go/bin/go; return; fi
	echo "cp.sh: no go toolchain found (set GO=/path/to/go)" >&2
	exit 1
}

needs_build() {
	[[ -x "$BIN" ]] || return 0
	local f
	for f in "$HERE/main.go" "$HERE/go.mod" "$HERE/go.sum"; do
		[[ "$f" -nt "$BIN" ]] && return 0
	done
	return 1
}

cmd_build() {
	if ! needs_build; then
		echo "cp.sh: $BIN is up to date" >&2
		return 0
	fi
	local go start end
	go="$(find_go)"
	mkdir -p "$(dirname "$BIN")"
	# Serialise concurrent builds (two `cp.sh up` at once would compile twice).
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$BIN.lock"
		flock 9
		if ! needs_build; then
			echo "cp.sh: $BIN was built by another cp.sh meanwhile" >&2
			exec 9>&-
			return 0
		fi
	fi
	echo "cp.sh: building $BIN ..." >&2
	start=$(date +%s)
	# Stamp the version (/version, kubectl version) like upstream's hack/lib/version.sh;
	# without it the server reports v0.0.0-master+$Format:%H$.
	local kv major minor ld="-s -w" pkg
	kv="$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$HERE/go.mod")"
	major="${kv#v}"; major="${major%%.*}"
	minor="${kv#v*.}"; minor="${minor%%.*}"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld+=" -X $pkg.gitVersion=$kv -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
	done
	(cd "$HERE" && CGO_ENABLED=0 "$go" build -p 2 -trimpath -ldflags="$ld" -o "$BIN" .)
	end=$(date +%s)
	echo "cp.sh: build took $((end - start))s" >&2
	exec 9>&- 2>/dev/null || true
}

tail_logs() {
	local dir="$1" f
	for f in "$dir"/*.log; do
		[[ -f "$f" ]] || continue
		echo "==== $f (last 50 lines) ====" >&2
		tail -n 50 "$f" >&2
	done
}

# Kill pid and wait for it (it is not our child after `up` returned, so poll).
wait_gone() {
	local pid="$1" secs="$2" i
	for ((i = 0; i < secs * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

child_pids() {
	# children of pid (kcm / scheduler)
	local pid="$1"
	if command -v pgrep >/dev/null 2>&1; then
		pgrep -P "$pid" 2>/dev/null || true
	else
		ps -o pid= --ppid "$pid" 2>/dev/null || true
	fi
}

cmd_up() {
	local dir="${1:?usage: cp.sh up DIR}"
	cmd_build
	mkdir -p "$dir"
	dir="$(cd "$dir" && pwd)"
	if [[ -f "$dir/pid" ]] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
		echo "cp.sh: already running in $dir (pid $(cat "$dir/pid")); run: cp.sh down $dir" >&2
		exit 1
	fi
	rm -f "$dir/pid" "$dir/up.out" "$dir/kubeconfig" "$dir"/*.log
	local args=(up --dir "$dir")
	[[ -n "${FABRIK_CP_PORT:-}" ]] && args+=(--port "$FABRIK_CP_PORT")
	[[ -n "${FABRIK_CP_KCM_CONTROLLERS:-}" ]] && args+=(--kcm-controllers "$FABRIK_CP_KCM_CONTROLLERS")
	[[ -n "${FABRIK_CP_KEEP:-}" ]] && args+=(--keep)
	local start pid
	start=$(date +%s)
	# setsid: own session, survives the calling shell; stdin /dev/null so the
	# binary does not treat stdin EOF as "parent died".
	setsid "$BIN" "${args[@]}" </dev/null >"$dir/up.out" 2>"$dir/up-stderr.log" &
	pid=$!
	echo "$pid" >"$dir/pid"
	while :; do
		if grep -q '^READY ' "$dir/up.out" 2>/dev/null; then
			break
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "cp.sh: control plane exited before READY" >&2
			tail_logs "$dir"
			rm -f "$dir/pid"
			exit 1
		fi
		if (($(date +%s) - start >= UP_TIMEOUT)); then
			echo "cp.sh: no READY after ${UP_TIMEOUT}s" >&2
			tail_logs "$dir"
			cmd_down "$dir" || true
			exit 1
		fi
		sleep 0.2
	done
	echo "cp.sh: ready after $(($(date +%s) - start))s (pid $pid)" >&2
	sed -n 's/^READY //p' "$dir/up.out" | head -n1
}

cmd_down() {
	local dir="${1:?usage: cp.sh down DIR}"
	if [[ ! -f "$dir/pid" ]]; then
		echo "cp.sh: no pid file in $dir" >&2
		return 0
	fi
	local pid kids k
	pid="$(cat "$dir/pid")"
	if kill -0 "$pid" 2>/dev/null; then
		kids="$(child_pids "$pid")"
		kill -TERM "$pid" 2>/dev/null || true
		if ! wait_gone "$pid" 20; then
			echo "cp.sh: pid $pid still alive after 20s, sending SIGKILL" >&2
			kill -KILL "$pid" 2>/dev/null || true
			wait_gone "$pid" 5 || true
		fi
		# children get SIGKILL via Pdeathsig; make sure anyway
		for k in $kids; do
			# only if it is still our binary (pid not reused)
			if [[ -r "/proc/$k/cmdline" ]] && tr '\0' ' ' <"/proc/$k/cmdline" | grep -qF -- "$BIN"; then
				echo "cp.sh: killing leftover child $k" >&2
				kill -KILL "$k" 2>/dev/null || true
			fi
		done
	fi
	rm -f "$dir/pid"
	echo "cp.sh: stopped" >&2
}

case "${1:-}" in
build) cmd_build ;;
up) shift; cmd_up "$@" ;;
down) shift; cmd_down "$@" ;;
path) echo "$BIN" ;;
*)
	echo "usage: $0 {build|up DIR|down DIR|path}" >&2
	exit 2
	;;
esac
