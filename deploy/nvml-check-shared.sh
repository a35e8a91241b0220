#!/bin/bash
# Per-process SM utilisation (two processes sharing the GPU, as time-slicing does):
# one busy, one mostly asleep. Read-only on the GPU's settings.
set -u
B=${FABRIK:-fabrik}
OUT=${OUT:-/tmp/fabrik-nvml-check}/shared; mkdir -p "$OUT"
get() { python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:19400'+sys.argv[1], timeout=5).read().decode())" "$1"; }
$B agent --listen 127.0.0.1:19400 --node devbox --pod-resources "" > $OUT/agent.log 2>&1 & P=$!
load() { python3 - "$1" <<'PY'
import torch, time, os, sys
duty = float(sys.argv[1]); print("pid", os.getpid(), "duty", duty, flush=True)
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
t = time.time()
while time.time() - t < 14:
    s = time.time()
    while time.time() - s < 0.1 * duty:
        c = a @ b
    torch.cuda.synchronize()
    time.sleep(0.1 * (1 - duty))
print("done", flush=True)
PY
}
load 1.0 > $OUT/busy.txt 2>&1 & A=$!
load 0.2 > $OUT/light.txt 2>&1 & L=$!
sleep 9
get /v1/snapshot > $OUT/two.json
nvidia-smi pmon -c 1 -s u > $OUT/pmon.txt 2>&1
wait $A $L
kill $P
python3 - "$OUT" <<'PY' | tee $OUT/result.txt
import json, sys
d = sys.argv[1]; s = json.load(open(f"{d}/two.json")); g = s["gpus"][0]
pid = lambda f: int(open(f"{d}/{f}").read().split()[1])
busy, light = pid("busy.txt"), pid("light.txt")
procs = {p["pid"]: p for p in g["processes"]}
print("gpu util", g["util_gpu"], "processes", g["processes"])
print("busy", busy, procs.get(busy, {}).get("sm_util"), "light", light, procs.get(light, {}).get("sm_util"))
print(open(f"{d}/pmon.txt").read())
PY
