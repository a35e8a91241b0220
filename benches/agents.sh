#!/usr/bin/env bash
# The cockpit streaming node agents through the API server's pod proxy (README
# "Performance"): CPU and RSS of `fabrik` in tmux over a window, with the agent streams for
# the nodes on screen, and with agent streaming off (--agent-selector ''), on the test
# control plane with `fabrik sim --agents` (one fake agent per node, 1 s samples).
#
#   benches/agents.sh [NODES] [SECONDS]     (default 48 20; root: --agents makes a netns)
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${1:-48}
SECS=${2:-20}
BIN=target/release/fabrik
[ -x "$BIN" ] || { echo "build first: cargo build --release" >&2; exit 1; }
DIR=$(mktemp -d /tmp/fabrik-bench-agents-XXXX)
tests/controlplane/cp.sh up "$DIR" >/dev/null
KC="$DIR/kubeconfig"
SOCK=fabrik-bench-agents-$$
cleanup() {
  tmux -L "$SOCK" kill-server 2>/dev/null || true
  [ -n "${SIM:-}" ] && kill "$SIM" 2>/dev/null && wait "$SIM" 2>/dev/null || true
  tests/controlplane/cp.sh down "$DIR" >/dev/null 2>&1 || true
}
trap cleanup EXIT
"$BIN" --kubeconfig "$KC" sim --nodes "$NODES" --agents >"$DIR/sim.out" 2>"$DIR/sim.log" &
SIM=$!
until grep -q '^READY' "$DIR/sim.out" 2>/dev/null; do
  kill -0 "$SIM" 2>/dev/null || { echo "fabrik sim exited:"; tail -20 "$DIR/sim.log"; exit 1; }
  sleep 1
done
sleep 5
clk=$(getconf CLK_TCK)
measure() {
  local label=$1; shift
  tmux -L "$SOCK" new-session -d -x 160 -y 50 "$BIN --kubeconfig $KC $*"
  sleep 8 # connect, list, first streams
  local pid; pid=$(tmux -L "$SOCK" list-panes -F '#{pane_pid}')
  local rows; rows=$(tmux -L "$SOCK" capture-pane -p | grep -cE '[0-9]+W ' || true)
  local t0; t0=$(awk '{print $14+$15}' /proc/"$pid"/stat)
  sleep "$SECS"
  local t1; t1=$(awk '{print $14+$15}' /proc/"$pid"/stat)
  local rss; rss=$(awk '/VmRSS/ {print $2}' /proc/"$pid"/status)
  tmux -L "$SOCK" kill-server
  awk -v l="$label" -v t=$((t1 - t0)) -v c="$clk" -v s="$SECS" -v r="$rss" -v n="$rows" \
    'BEGIN { printf "%-40s CPU %.2f%% of a core, RSS %.0f MiB, %d node rows with telemetry\n", l, 100*t/c/s, r/1024, n }'
}
echo "$NODES nodes, fake agents sampling every 1 s, ${SECS}s windows"
measure "agent streams for the nodes on screen"
measure "no agent streams (--agent-selector '')" --agent-selector "''"
