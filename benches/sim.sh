# Sourced by the bench scripts: start `fabrik sim` on a control plane and wait until it is
# READY. Sets SIM (its pid, for the caller's cleanup); exits when the simulator does.
#
#   sim_up BIN KUBECONFIG DIR NODES PODS
sim_up() {
  local bin=$1 kc=$2 dir=$3 nodes=$4 pods=$5
  "$bin" --kubeconfig "$kc" sim --nodes "$nodes" --workload --pods "$pods" >"$dir/sim.out" 2>"$dir/sim.log" &
  SIM=$!
  until grep -q '^READY' "$dir/sim.out" 2>/dev/null; do
    kill -0 "$SIM" 2>/dev/null || { echo "fabrik sim exited:"; tail -20 "$dir/sim.log"; exit 1; }
    sleep 1
  done
}
