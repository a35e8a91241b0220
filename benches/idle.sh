#!/usr/bin/env bash
# Measures the real cockpit in a real terminal (tmux): CPU time and bytes written to the
# terminal over a window, once with the simulator frozen (nothing changes) and once with
# its default one-second tick. Usage: benches/idle.sh [seconds] (build with --release first).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
bin=target/release/fabrik
[ -x "$bin" ] || { echo "build first: cargo build --release" >&2; exit 1; }
sock=fabrik-idle-$$
trap 'tmux -L "$sock" kill-server 2>/dev/null || true' EXIT
clk=$(getconf CLK_TCK)
measure() {
  local label=$1; shift
  local out; out=$(mktemp)
  tmux -L "$sock" new-session -d -x 160 -y 45 "$bin demo $*"
  sleep 2
  local pid; pid=$(tmux -L "$sock" list-panes -F '#{pane_pid}')
  tmux -L "$sock" pipe-pane -o "cat > $out"
  local t0; t0=$(awk '{print $14+$15}' /proc/"$pid"/stat)
  sleep "$secs"
  local t1; t1=$(awk '{print $14+$15}' /proc/"$pid"/stat)
  tmux -L "$sock" pipe-pane
  local bytes; bytes=$(wc -c < "$out")
  local rss; rss=$(awk '/VmRSS/ {print $2}' /proc/"$pid"/status)
  tmux -L "$sock" kill-server
  awk -v l="$label" -v t=$((t1 - t0)) -v c="$clk" -v s="$secs" -v b="$bytes" -v r="$rss" \
    'BEGIN { printf "%-34s CPU %.2f%% of a core, %d bytes/s to the terminal, RSS %.0f MiB\n", l, 100*t/c/s, b/s, r/1024 }'
  rm -f "$out"
}
measure "frozen factory (--tick-ms 60000)" --tick-ms 60000
measure "live factory (1 s ticks)"
