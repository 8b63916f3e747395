#!/usr/bin/env bash
# up_bench: the whole stack on one machine (`kcsi up`), measured as a user meets it.
#   1. start-up: time from `kcsi up` to ready (best and median of --starts runs);
#   2. idle memory of the whole stack: RSS and private memory (RssAnon) summed over every process;
#   3. N pods, each with its own PVC (loop driver, WaitForFirstConsumer class), applied at once:
#      time until every pod is Running, with p50/p99 of the per-pod times (one watch of the
#      pods, not kubectl in a loop), where the time went per phase (PV created, pod bound,
#      VolumeAttachment, Ready) from the objects' timestamps, then the teardown (pods and
#      claims deleted at once) until no PV and no VolumeAttachment is left;
#   4. CPU seconds each component used during 3, and what else used the CPU meanwhile.
# --nodes above 16 runs the node side as three processes for all nodes (kcsi up's fleet mode).
# It never fails on a figure; it fails only when the stack cannot run.
#
#   bench/up_bench.sh [--pods N] [--nodes N] [--starts N]     (KCSI_BIN: default build/bin)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
bin=${KCSI_BIN:-$src/build/bin}
kubectl=${KUBECTL:-kubectl}
pods=100 nodes=2 starts=5
while [ $# -gt 0 ]; do
	case $1 in
	--pods) pods=$2; shift 2 ;;
	--nodes) nodes=$2; shift 2 ;;
	--starts) starts=$2; shift 2 ;;
	*) echo "up_bench: unknown argument $1" >&2; exit 2 ;;
	esac
done
work=$(mktemp -d /tmp/kcsi-upbench.XXXXXX)
up_pid=
finish() {
	[ -n "$up_pid" ] && kill -TERM "$up_pid" 2>/dev/null && wait "$up_pid" 2>/dev/null
	rm -rf "$work"
}
trap finish EXIT

now_ms() { echo $(($(date +%s%N) / 1000000)); }
start_up() {
	local dir=$1 t0
	t0=$(now_ms)
	"$bin/kcsi" up --dir "$dir" --nodes "$nodes" --component-v 0 >"$dir.out" 2>&1 &
	up_pid=$!
	for _ in $(seq 1 3000); do
		[ -f "$dir/ready" ] && { ready_ms=$(($(now_ms) - t0)); return 0; }
		kill -0 "$up_pid" 2>/dev/null || break
		sleep 0.01
	done
	cat "$dir.out" >&2
	echo "up_bench: kcsi up did not become ready" >&2
	exit 1
}
stop_up() { kill -TERM "$up_pid"; wait "$up_pid" || true; up_pid=; }

# Processes of the stack: kcsi up's children (each a process group of its own).
stack_pids() { pgrep -P "$up_pid" | tr '\n' ' '; }
sum_status() { # field (VmRSS or RssAnon) summed in KiB
	local f=$1 total=0 v
	for p in $(stack_pids) $up_pid; do
		v=$(awk -v f="$f:" '$1 == f {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
		total=$((total + ${v:-0}))
	done
	echo $total
}
cpu_of() { # utime+stime in clock ticks
	awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}
name_of() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | awk '{n=$1; sub(".*/", "", n); print n}'; }

echo "up_bench: $nodes nodes, $pods pods; machine: $(nproc) cores"

# 1. start-up
times=()
for i in $(seq 1 "$starts"); do
	start_up "$work/s$i"
	times+=("$ready_ms")
	stop_up
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
echo "start-up to ready: best $(echo "$sorted" | head -1) ms, median $(echo "$sorted" | sed -n "$(((starts + 1) / 2))p") ms (runs: ${times[*]})"

# 2. idle memory
start_up "$work/m"
export KUBECONFIG=$work/m/kubeconfig
sleep 2
# PSS shares each library page among the processes that map it: the stack's real footprint.
sum_pss() {
	local total=0 v
	for p in $(stack_pids) $up_pid; do
		v=$(awk '$1 == "Pss:" {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null)
		total=$((total + ${v:-0}))
	done
	echo $total
}
echo "stack idle ($(stack_pids | wc -w) processes): RSS $(($(sum_status VmRSS) / 1024)) MiB, PSS $(($(sum_pss) / 1024)) MiB, private (RssAnon) $(($(sum_status RssAnon) / 1024)) MiB"
for p in $(stack_pids); do
	printf '  %-28s RSS %6s KiB  private %6s KiB\n' "$(name_of "$p")" \
		"$(awk '$1 == "VmRSS:" {print $2}' /proc/$p/status)" "$(awk '$1 == "RssAnon:" {print $2}' /proc/$p/status)"
done

# 3. N pods with N claims
"$kubectl" apply -f "$src/examples/storageclass-wffc.yaml" >/dev/null
{
	for i in $(seq 1 "$pods"); do
		cat <<EOF
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: c$i}
spec:
  storageClassName: kcsi-loop-wffc
  accessModes: ["ReadWriteOnce"]
  resources: {requests: {storage: 16Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: p$i}
spec:
  containers: [{name: app, image: busybox, volumeMounts: [{name: d, mountPath: /d}]}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: c$i}}]
EOF
	done
} >"$work/load.yaml"
declare -A cpu0
for p in $(stack_pids); do cpu0[$p]=$(cpu_of "$p"); done
total0=$(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat)
t0=$(now_ms)
"$kubectl" apply -f "$work/load.yaml" >/dev/null
apply_ms=$(($(now_ms) - t0))
# One watch of the pods (not kubectl polled in a loop, which at 1,000 pods costs more CPU than
# the nodes do): the moment each pod is first seen Running.
python3 - "$pods" "$t0" "$KUBECONFIG" "$apply_ms" <<'EOF'
import json, re, sys, time, urllib.request
n, t0, kubeconfig, apply_ms = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
server = re.search(r"server: (http://\S+)", open(kubeconfig).read()).group(1)
seen = {}
deadline = time.time() + 300
url = server + "/api/v1/namespaces/default/pods?watch=1&timeoutSeconds=300"
with urllib.request.urlopen(url, timeout=310) as r:
    for line in r:
        p = json.loads(line).get("object", {})
        if p.get("status", {}).get("phase") == "Running" and p["metadata"]["name"] not in seen:
            seen[p["metadata"]["name"]] = time.time() * 1000 - t0
        if len(seen) >= n or time.time() > deadline:
            break
v = sorted(seen.values())
if len(v) < n:
    print(f"pods Running: only {len(v)} of {n} within 300 s")
else:
    pct = lambda q: v[min(len(v) - 1, int(q * len(v)))]
    print(f"{n} pods Running: all after {v[-1]/1000:.2f} s, p50 {pct(0.5)/1000:.2f} s, "
          f"p99 {pct(0.99)/1000:.2f} s (kubectl apply of the {2*n} objects: "
          f"{apply_ms/1000:.2f} s of it)")
EOF
# Where the time went, from the objects' own timestamps (1 s resolution): the claim's PV created
# (provisioned), the pod bound to its node (PodScheduled), its VolumeAttachment created, the pod
# Ready (staged, published and reported by kcsi-node).
"$kubectl" get pods,pv,volumeattachments,pvc -o json >"$work/objects.json"
python3 - "$work/objects.json" <<'EOF'
import json, sys, datetime as dt
items = json.load(open(sys.argv[1]))["items"]
ts = lambda s: dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
kind = lambda k: [i for i in items if i["kind"] == k]
pods, pvcs = kind("Pod"), {c["metadata"]["name"]: c for c in kind("PersistentVolumeClaim")}
pv_t = {v["metadata"]["name"]: ts(v["metadata"]["creationTimestamp"]) for v in kind("PersistentVolume")}
va_t = {v["spec"]["source"].get("persistentVolumeName"): ts(v["metadata"]["creationTimestamp"])
        for v in kind("VolumeAttachment")}
if not pods:
    sys.exit(0)
t0 = min(ts(p["metadata"]["creationTimestamp"]) for p in pods)
def cond(p, t):
    for c in p.get("status", {}).get("conditions", []):
        if c["type"] == t:
            return ts(c["lastTransitionTime"]) - t0
cols = {"pod created": [], "PV created": [], "pod bound to node": [], "VA created": [],
        "pod Ready": []}
for p in pods:
    claim = p["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
    pv = pvcs.get(claim, {}).get("spec", {}).get("volumeName")
    for k, v in (("pod created", ts(p["metadata"]["creationTimestamp"]) - t0),
                 ("PV created", pv_t[pv] - t0 if pv in pv_t else None),
                 ("pod bound to node", cond(p, "PodScheduled")),
                 ("VA created", va_t[pv] - t0 if pv in va_t else None),
                 ("pod Ready", cond(p, "Ready"))):
        if v is not None:
            cols[k].append(v)
print("phases, seconds after the first pod was created (p50 / p90 / last):")
for k, v in cols.items():
    v.sort()
    if v:
        print(f"  {k:18} {v[len(v)//2]:5.0f} {v[int(len(v)*0.9)]:5.0f} {v[-1]:5.0f}")
EOF
t1=$(now_ms)
"$kubectl" delete pods --all --wait=false >/dev/null
"$kubectl" delete pvc --all --wait=false >/dev/null
for _ in $(seq 1 3000); do
	[ -z "$("$kubectl" get pv,volumeattachments -o name 2>/dev/null)" ] && break
	sleep 0.1
done
echo "teardown of $pods pods and claims: $((($(now_ms) - t1))) ms until no PV and no VolumeAttachment is left"
total1=$(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat)
hz=$(getconf CLK_TCK)
stack_ticks=0
echo "CPU seconds per component during the load and teardown:"
for p in $(stack_pids); do
	d=$(($(cpu_of "$p") - ${cpu0[$p]:-0}))
	stack_ticks=$((stack_ticks + d))
	printf '  %-28s %6.2f s\n' "$(name_of "$p")" "$(echo "$d $hz" | awk '{print $1 / $2}')"
done
echo "stack total $(echo "$stack_ticks $hz" | awk '{printf "%.2f", $1 / $2}') s of $(echo "$((total1 - total0)) $hz" | awk '{printf "%.2f", $1 / $2}') s used on the machine (the rest: kubectl, this script's polling, other processes)"
stop_up
