#!/usr/bin/env bash
# Smoke test for a running control plane: tests/controlplane/smoke-test.sh DIR
# (DIR as given to `cp.sh up DIR`). Needs curl and jq. Exit 0 when all checks pass.
set -uo pipefail

D="${1:?usage: smoke-test.sh DIR}"
KC="$D/kubeconfig"
SERVER="$(sed -n 's/^ *server: *//p' "$KC" | head -n1)"
CA="$D/certs/apiserver.crt"
ADMIN="$(awk -F, '$2=="admin"{print $1}' "$D/tokens.csv")"
TENANT="$(awk -F, '$2=="tenant-a"{print $1}' "$D/tokens.csv")"
FAIL=0

ok() { echo "PASS: $*"; }
bad() { echo "FAIL: $*"; FAIL=1; }

# req TOKEN METHOD PATH [CONTENT-TYPE BODY] -> prints "HTTP_CODE" on first line, body after
req() {
	local tok="$1" m="$2" p="$3" ct="${4:-}" body="${5:-}"
	local args=(-sS --cacert "$CA" -H "Authorization: Bearer $tok" -X "$m" -o /tmp/smoke.body -w '%{http_code}')
	[[ -n "$ct" ]] && args+=(-H "Content-Type: $ct" --data-binary "$body")
	curl "${args[@]}" "$SERVER$p"
}

echo "server: $SERVER"

# 1. readyz
code="$(req "$ADMIN" GET /readyz)"
[[ "$code" == 200 && "$(cat /tmp/smoke.body)" == ok ]] && ok "/readyz = ok" || bad "/readyz: $code $(cat /tmp/smoke.body)"

# 2. namespaces
code="$(req "$ADMIN" GET /api/v1/namespaces)"
nss="$(jq -r '.items[].metadata.name' /tmp/smoke.body | sort | tr '\n' ' ')"
for ns in default kube-system tenant-a; do
	grep -qw -- "$ns" <<<"$nss" || bad "namespace $ns missing (have: $nss)"
done
ok "namespaces: $nss"

# 3. default ServiceAccount (KCM serviceaccount controller)
found=
for _ in $(seq 1 60); do
	code="$(req "$ADMIN" GET /api/v1/namespaces/default/serviceaccounts/default)"
	[[ "$code" == 200 ]] && { found=1; break; }
	sleep 0.5
done
[[ -n "$found" ]] && ok "serviceaccount default/default exists (KCM runs)" || bad "no default ServiceAccount after 30s"

# 4. Node + status
NODE="smoke-node-$RANDOM"
code="$(req "$ADMIN" POST /api/v1/nodes application/json \
	"{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$NODE\",\"labels\":{\"kubernetes.io/hostname\":\"$NODE\"}}}")"
[[ "$code" == 201 ]] && ok "created node $NODE" || bad "create node: $code $(cat /tmp/smoke.body)"
now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
code="$(req "$ADMIN" PATCH "/api/v1/nodes/$NODE/status" application/merge-patch+json \
	"{\"status\":{\"capacity\":{\"pods\":\"110\",\"cpu\":\"8\",\"memory\":\"32Gi\"},\"allocatable\":{\"pods\":\"110\",\"cpu\":\"8\",\"memory\":\"32Gi\"},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\",\"message\":\"fake\",\"lastHeartbeatTime\":\"$now\",\"lastTransitionTime\":\"$now\"}]}}")"
[[ "$code" == 200 ]] && ok "patched node status (allocatable + Ready)" || bad "patch node status: $code $(cat /tmp/smoke.body)"

# 5. Pod without nodeName -> scheduler binds it
POD="smoke-pod-$RANDOM"
code="$(req "$ADMIN" POST /api/v1/namespaces/default/pods application/json \
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"$POD\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"busybox\",\"resources\":{\"requests\":{\"cpu\":\"100m\"}}}]}}")"
[[ "$code" == 201 ]] && ok "created pod $POD" || bad "create pod: $code $(cat /tmp/smoke.body)"
bound=
t0=$(date +%s)
for _ in $(seq 1 60); do
	req "$ADMIN" GET "/api/v1/namespaces/default/pods/$POD" >/dev/null
	bound="$(jq -r '.spec.nodeName // empty' /tmp/smoke.body)"
	[[ -n "$bound" ]] && break
	sleep 0.5
done
[[ "$bound" == "$NODE" ]] && ok "scheduler bound $POD to $bound after $(($(date +%s) - t0))s" || bad "pod not bound to $NODE (nodeName='$bound'): $(jq -c .status /tmp/smoke.body)"

# 6. DRA resource.k8s.io/v1
code="$(req "$ADMIN" GET /apis/resource.k8s.io/v1)"
res="$(jq -r '.resources[].name' /tmp/smoke.body 2>/dev/null | tr '\n' ' ')"
for r in resourceslices resourceclaims deviceclasses; do
	grep -qw -- "$r" <<<"$res" || bad "resource.k8s.io/v1 lacks $r ($code: $res)"
done
ok "resource.k8s.io/v1: $res"
# resource.k8s.io/v1alpha3 (DeviceTaintRule), served by --runtime-config
code="$(req "$ADMIN" GET /apis/resource.k8s.io/v1alpha3)"
res="$(jq -r '.resources[].name' /tmp/smoke.body 2>/dev/null | tr '\n' ' ')"
grep -qw -- devicetaintrules <<<"$res" && ok "resource.k8s.io/v1alpha3: $res" || bad "resource.k8s.io/v1alpha3 lacks devicetaintrules ($code: $res)"

# 7. tenant identity
code="$(req "$TENANT" GET /api/v1/nodes)"
[[ "$code" == 200 ]] && ok "tenant GET /api/v1/nodes -> 200" || bad "tenant GET nodes: $code"
code="$(req "$TENANT" PATCH "/api/v1/nodes/$NODE" application/merge-patch+json '{"metadata":{"labels":{"x":"y"}}}')"
[[ "$code" == 403 ]] && ok "tenant PATCH node -> 403" || bad "tenant PATCH node: $code"
code="$(req "$TENANT" POST "/api/v1/namespaces/default/pods/$POD/eviction" application/json \
	"{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":{\"name\":\"$POD\",\"namespace\":\"default\"}}")"
[[ "$code" == 403 ]] && ok "tenant POST pods/eviction -> 403" || bad "tenant eviction: $code"
code="$(req "$TENANT" POST /api/v1/namespaces/tenant-a/pods application/json '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}')"
[[ "$code" == 403 ]] && ok "tenant create pod in tenant-a -> 403" || bad "tenant create pod: $code"

# cleanup (gracePeriodSeconds=0: no kubelet will ever confirm termination)
req "$ADMIN" DELETE "/api/v1/namespaces/default/pods/$POD?gracePeriodSeconds=0" >/dev/null
req "$ADMIN" DELETE "/api/v1/nodes/$NODE" >/dev/null

if ((FAIL)); then echo "SMOKE TEST FAILED"; exit 1; fi
echo "SMOKE TEST PASSED"
