#!/bin/bash
# deploy/NVML_CHECK.md on a real GPU: one fabrik NVML sample compared with nvidia-smi, idle
# and under load. Read-only: no nvidia-smi set call, MIG mode untouched.
set -u
B=${FABRIK:-fabrik}
OUT=${OUT:-/tmp/fabrik-nvml-check}; mkdir -p "$OUT"
get() { python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:19400'+sys.argv[1], timeout=5).read().decode())" "$1"; }
nvidia-smi -L > $OUT/smi.txt 2>&1
nvidia-smi --query-gpu=uuid,name,memory.total,memory.used,mig.mode.current,utilization.gpu,power.draw,temperature.gpu,pci.bus_id,driver_version --format=csv,noheader,nounits >> $OUT/smi.txt 2>&1
$B agent --listen 127.0.0.1:19400 --node devbox --pod-resources "" > $OUT/agent.log 2>&1 & P=$!
for _ in $(seq 50); do get /healthz >/dev/null 2>&1 && break; sleep 0.2; done
sleep 3
get /v1/snapshot > $OUT/idle.json 2>>$OUT/agent.log
# Load: a bf16 matmul loop for ~12 s; the agent must see the process and the utilisation.
python3 - > $OUT/load.txt 2>&1 <<'PY' &
import torch, time, os
print("pid", os.getpid(), flush=True)
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
t = time.time()
while time.time() - t < 12:
    c = a @ b
torch.cuda.synchronize(); print("done", flush=True)
PY
L=$!
sleep 7
get /v1/snapshot > $OUT/load.json 2>>$OUT/agent.log
nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits >> $OUT/smi.txt 2>&1
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits >> $OUT/smi.txt 2>&1
get /metrics | head -60 > $OUT/metrics.txt 2>&1
wait $L
kill $P; sleep 1
python3 - "$OUT" > $OUT/compare.txt 2>&1 <<'PY'
import json, sys
d = sys.argv[1]; bad = 0
def chk(what, ok, detail=""):
    global bad; bad += not ok; print(("ok  " if ok else "DIFF"), what, detail)
smi = open(f"{d}/smi.txt").read().splitlines()
rows = [r.split(",") for r in smi if r.count(",") >= 9]
for name in ["idle.json", "load.json"]:
    try:
        s = json.load(open(f"{d}/{name}"))
    except Exception as e:
        chk(f"{name} parses", False, repr(e)); continue
    print("==", name, "gpus:", len(s.get("gpus", [])), "driver", s.get("driver_version"), "cuda", s.get("cuda_driver_version"))
    g = {x["uuid"]: x for x in s.get("gpus", [])}
    for r in rows:
        uuid, gname, tot, used, mig, util, power, temp, bus, drv = [c.strip() for c in r]
        f = g.get(uuid); chk(f"{uuid} present", f is not None)
        if not f: continue
        chk("name", f.get("name") == gname, f"{f.get('name')!r} vs {gname!r}")
        chk("memory.total", abs(f["memory_total_mib"] - int(tot)) <= 1, f"{f['memory_total_mib']} vs {tot}")
        chk("mig", f["mig_enabled"] == (mig == "Enabled"), f"{f['mig_enabled']} vs {mig}")
        chk("pci bus id", (f.get("pci_bus_id") or "").lower().endswith(bus.lower()[-12:]), f"{f.get('pci_bus_id')} vs {bus}")
        chk("driver", s.get("driver_version") == drv, f"{s.get('driver_version')} vs {drv}")
        print("   util", f.get("util_gpu"), "mem used", f.get("memory_used_mib"), "power mW", f.get("power_mw"),
              "limit", f.get("power_limit_mw"), "temp", f.get("temp_c"), "sm MHz", f.get("sm_clock_mhz"),
              "ecc", f.get("ecc_uncorrected"), "throttle", f.get("throttle_reasons"), "xid", f.get("last_xid"))
        print("   processes", f.get("processes"), "nvlinks", len(f.get("nvlinks") or []), "peers", f.get("peers"))
        if name == "load.json":
            chk("util under load > 50", (f.get("util_gpu") or 0) > 50, str(f.get("util_gpu")))
            pid = next((int(l.split()[1]) for l in open(f"{d}/load.txt") if l.startswith("pid")), None)
            chk("load process listed", any(p.get("pid") == pid for p in f.get("processes") or []), f"pid {pid}")
print("differences:", bad)
PY
cat $OUT/compare.txt
