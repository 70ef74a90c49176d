#!/usr/bin/env bash
# ved run as a service (docs/operations.md), against a real ved of this build
# with two busy clients (prog_shim_busy on the fake driver under ve-run):
#   ops_metrics_http       GET /metrics with curl: both clients, their SMs, waits
#                          and reasons for their grants, the device; the
#                          exposition content type; HEAD
#   ops_metrics_errors     404, 405, an oversized request (431), an idle
#                          connection that sends nothing: ved keeps answering
#   ops_metrics_promtool   Prometheus's promtool accepts the text (skip without it)
#   ops_metrics_documented every metric family is in docs/operations.md
#   ops_metrics_ctl        `ve-ctl metrics` prints the same families
#   ops_clients            `ve-ctl clients` lists both with the SMs they may use and why
#   ops_trace              `ve-ctl trace --seconds 1`: JSON with tracks per client and
#                          per entry, grant/lease spans, no overlap within a track
#   ops_drain              drain refuses a new client, registered ones go on; resume
#   ops_drain_abandoned    a drain whose tool gave up on a stopped ved is not applied
#   ops_reload             SIGHUP applies a new policy with the clients registered;
#                          a bad one is refused and the running one stays
#   ops_drain_wait         drain --wait returns once the clients are done
#   ops_ved_exit           ved (self-check on) exits 0 on SIGTERM
#   tests/ved_ops.sh ROOT BUILD
# Needs curl and python3 (skips without them), libve.so and the fake driver.
set -u
. "$(dirname "$0")/sh_harness.sh"
ALL="ops_metrics_http ops_metrics_errors ops_metrics_promtool ops_metrics_documented
     ops_metrics_ctl ops_clients ops_trace ops_drain ops_drain_abandoned ops_reload
     ops_drain_wait ops_ved_exit"
for t in curl python3; do
	if ! command -v $t >/dev/null 2>&1; then
		for n in $ALL; do skip "$n" "no $t"; done
		summary
	fi
done
fake=$build/fakecuda/libcuda.so.1
prog=$build/tests/prog_shim_busy
if [ ! -f "$build/libve.so" ] || [ ! -f "$fake" ] || [ ! -x "$prog" ] || [ ! -x "$build/ved" ]; then
	for n in $ALL; do skip "$n" "needs ved, libve.so, the fake driver and prog_shim_busy"; done
	summary
fi

tmp=$(mktemp -d "/tmp/ve-ops.XXXXXX") # short: a socket path must fit 108 bytes
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	[ -n "${ved:-}" ] && kill -9 "$ved" 2>/dev/null
	wait 2>/dev/null
	[ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
sock=$tmp/run/ved-0.sock
# ved's one-per-device lock sits next to the default socket: a folder of our
# own, so a ved the user runs on this machine does not refuse ours.
export XDG_RUNTIME_DIR=$tmp
unset VE_SOCKET_DIR
conf=$tmp/ved.conf
printf 'policy = tput\nmetrics_listen = 0\ncheck = 1\nlog_level = info\n' >"$conf"
ctl() { "$build/ve-ctl" --socket "$sock" "$@"; }

env -u VE_VED_METRICS_LISTEN -u VE_VED_POLICY "$build/ved" --socket "$sock" --config "$conf" \
	>"$tmp/ved.log" 2>&1 &
ved=$!
port=""
for _ in $(seq 100); do
	port=$(sed -n 's|.*metrics at http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$tmp/ved.log")
	[ -n "$port" ] && [ -S "$sock" ] && break
	sleep 0.05
done
if [ -z "$port" ]; then
	for n in $ALL; do fail "$n" "ved did not start: $(tail -n 5 "$tmp/ved.log")"; done
	summary
fi
url=http://127.0.0.1:$port/metrics

client() { # NAME SECONDS [ve-run options]
	local name=$1 secs=$2
	shift 2
	env VETEST_SECONDS="$secs" VETEST_STOP_FILE="$tmp/stop" VETEST_EXPECT_GREEN=1 VE_LIBCUDA="$fake" \
		LD_LIBRARY_PATH="$build/fakecuda" VE_DAEMON="$sock" \
		timeout 180 "$build/ve-run" "$@" -- "$prog" >"$tmp/$name.log" 2>&1
}
# Busy until ops_drain_wait creates $tmp/stop (120 s at most): the tests
# before it need both registered however slow the machine is.
client busyA 120 &
pids+=($!)
client busyB 120 --class latency &
pids+=($!)
n=0
for _ in $(seq 100); do
	n=$(ctl --json clients 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["clients"]))' 2>/dev/null)
	[ "${n:-0}" = 2 ] && break
	sleep 0.05
done
sleep 0.5 # some binds, waits and grants to count

# ---- ops_metrics_http
hdr=$tmp/h.txt
body=$tmp/m.txt
if ! curl -sS -f -D "$hdr" -o "$body" --max-time 5 "$url"; then
	fail ops_metrics_http "curl failed"
else
	bad=""
	grep -qi '^content-type: text/plain; version=0.0.4' "$hdr" || bad="$bad content-type"
	grep -q '^ve_clients{gpu="0"} 2$' "$body" || bad="$bad ve_clients"
	[ "$(grep -c '^ve_client_sms_granted{' "$body")" = 2 ] || bad="$bad sms_granted"
	grep -q '^ve_client_bind_wait_seconds{.*quantile="0.99"}' "$body" || bad="$bad wait-p99"
	grep -q '^ve_client_binds_total{.*class="latency".*} [1-9]' "$body" || bad="$bad latency-binds"
	grep -q '^ve_device_sm_utilization_ratio{gpu="0"} ' "$body" || bad="$bad utilization"
	grep -q '^ve_pool_entries_in_use{gpu="0",state="leased"} ' "$body" || bad="$bad entries"
	# time with each reason for its grant: the policy (tput) gives one for both
	[ "$(grep -E '^ve_client_grant_reason_seconds_total\{.*why="[a-z-]{2,}"\} ' "$body" |
		sed 's/.*client="\([0-9]*\)".*/\1/' | sort -u | wc -l)" = 2 ] || bad="$bad grant-reason"
	curl -sS -f -I --max-time 5 "$url" | grep -qi '^content-length: [1-9]' || bad="$bad HEAD"
	if [ -z "$bad" ]; then ok ops_metrics_http; else fail ops_metrics_http "wrong:$bad"; fi
fi

# ---- ops_metrics_errors
bad=""
exec 3<>"/dev/tcp/127.0.0.1/$port" # an idle scraper that never sends
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$port/nope")
[ "$code" = 404 ] || bad="$bad 404:$code"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST "$url")
[ "$code" = 405 ] || bad="$bad 405:$code"
big=$(head -c 6000 /dev/zero | tr '\0' a)
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H "X-Big: $big" "$url")
[ "$code" = 431 ] || bad="$bad 431:$code"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$url")
[ "$code" = 200 ] || bad="$bad after:$code"
exec 3>&-
if [ -z "$bad" ]; then ok ops_metrics_errors; else fail ops_metrics_errors "$bad"; fi

# ---- ops_metrics_promtool
if command -v promtool >/dev/null 2>&1; then
	if out=$(promtool check metrics <"$body" 2>&1); then
		ok ops_metrics_promtool
	else
		fail ops_metrics_promtool "$(echo "$out" | head -n 10)"
	fi
else
	skip ops_metrics_promtool "no promtool (Debian: apt-get install prometheus)"
fi

# ---- ops_metrics_documented
missing=""
for m in $(sed -n 's/^# TYPE \([a-z_0-9]*\) .*/\1/p' "$body"); do
	grep -q "\`$m\`" "$root/docs/operations.md" || missing="$missing $m"
done
if [ -z "$missing" ] && grep -q '^# TYPE' "$body"; then
	ok ops_metrics_documented
else
	fail ops_metrics_documented "not in docs/operations.md:$missing"
fi

# ---- ops_metrics_ctl
if ctl metrics >"$tmp/ctl.txt" 2>"$tmp/ctl.err" &&
	[ "$(grep '^# TYPE' "$tmp/ctl.txt")" = "$(grep '^# TYPE' "$body")" ]; then
	ok ops_metrics_ctl
else
	fail ops_metrics_ctl "families differ or ve-ctl failed: $(head -c 300 "$tmp/ctl.err")"
fi

# ---- ops_clients
out=$(ctl clients 2>&1)
js=$(ctl --json clients 2>&1)
if [ "$(echo "$out" | grep -c prog_shim_busy)" = 2 ] &&
	echo "$js" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert len(d["clients"]) == 2, d
for c in d["clients"]:
    assert c["sms"] >= 0 and "grant_entry" in c and c["user"] and c["bindings"] > 0, c
    assert c["late"] == 0, c  # no deadlines given: nothing can be late
    assert c["lend_entry"] >= -1 and (c["lend_entry"] == -1) == (c["lent_sms"] == 0), c
    # the policy (tput) says why each has its grant
    assert c["why"] in ("idle", "alone", "split", "shared", "turn", "in-gap", "waiting",
                        "narrow"), c
assert {c["class"] for c in d["clients"]} == {"batch", "latency"}, d
' 2>"$tmp/py.err" && echo "$out" | head -n 2 | grep -q " why "; then
	ok ops_clients
else
	fail ops_clients "$(echo "$out" | head -n 4) $(head -c 300 "$tmp/py.err")"
fi

# ---- ops_trace
if ctl trace --seconds 1 "$tmp/t.json" >"$tmp/trace.out" 2>&1 &&
	python3 - "$tmp/t.json" 2>"$tmp/py.err" <<'EOF'; then
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
         if e["ph"] == "M" and e["name"] == "thread_name"}
groups = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
assert set(groups.values()) >= {"pool entries", "clients"}, groups
assert any(n.startswith("entry ") and "SMs" in n for n in names.values()), names
assert sum(1 for n in names.values() if n.startswith("client ") and "prog_shim_busy" in n) >= 2, names
xs = [e for e in ev if e["ph"] == "X"]
assert any(e["name"].startswith("leased by") or e["name"].startswith("granted to") for e in xs)
# per op (ved binds every op) or per grant (grant mode: ved sees grants only)
assert any(e["name"].startswith("op on entry") or e["name"].startswith("granted to") for e in xs)
# Perfetto drops slices that overlap without nesting on one track.
by = {}
for e in xs:
    by.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
for k, v in by.items():
    v.sort()
    for a, b in zip(v, v[1:]):
        assert b[0] >= a[1] - 1e-3, (names.get(k), a, b)
EOF
	ok ops_trace
else
	fail ops_trace "$(head -c 300 "$tmp/trace.out") $(tail -n 3 "$tmp/py.err")"
fi

# ---- ops_drain
metric() { curl -s --max-time 5 "$url" | sed -n "s/^$1{gpu=\"0\"} //p"; }
bad=""
ctl drain >/dev/null 2>&1 || bad="$bad drain-exit"
[ "$(metric ve_ved_draining)" = 1 ] || bad="$bad draining-gauge"
client late 0.3 # refused by ved: safe mode (VE_DAEMON=path), finishes on its own
[ $? -eq 0 ] || bad="$bad late-client-failed"
r=$(metric ve_clients_refused_draining_total)
[ "${r:-0}" -ge 1 ] 2>/dev/null || bad="$bad refused:$r"
[ "$(metric ve_clients)" = 2 ] || bad="$bad registered:$(metric ve_clients)"
ctl resume >/dev/null 2>&1 || bad="$bad resume-exit"
[ "$(metric ve_ved_draining)" = 0 ] || bad="$bad resumed-gauge"
if [ -z "$bad" ]; then ok ops_drain; else fail ops_drain "$bad"; fi

# ---- ops_drain_abandoned
# A tool that gave up on a stopped ved told its user the drain failed: ved,
# once it runs again, must not drain.
bad=""
kill -STOP "$ved"
"$build/ve-ctl" --socket "$sock" drain >/dev/null 2>&1 & # not through ctl(): $! must be ve-ctl
cpid=$!
sleep 0.5
kill -KILL "$cpid" 2>/dev/null
wait "$cpid" 2>/dev/null
kill -CONT "$ved"
sleep 0.3
[ "$(metric ve_ved_draining)" = 0 ] || bad="$bad drained-for-a-gone-tool"
grep -q "drain request dropped: the tool that sent it has gone" "$tmp/ved.log" || bad="$bad no-log-line"
[ "$(metric ve_clients)" = 2 ] || bad="$bad registered:$(metric ve_clients)"
if [ -z "$bad" ]; then ok ops_drain_abandoned; else fail ops_drain_abandoned "$bad"; fi

# ---- ops_reload
policy() { curl -s --max-time 5 "$url" | sed -n 's/^ve_policy_info{.*policy="\([^"]*\)".*/\1/p'; }
bad=""
sed -i 's/^policy = .*/policy = fixed/' "$conf"
kill -HUP "$ved"
for _ in $(seq 40); do
	[ "$(policy)" = fixed ] && break
	sleep 0.05
done
[ "$(policy)" = fixed ] || bad="$bad sighup:$(policy)"
[ "$(metric ve_clients)" = 2 ] || bad="$bad clients-after-reload"
sed -i 's/^policy = .*/policy = no_such_policy/' "$conf"
if ctl reload >"$tmp/reload.out" 2>&1; then bad="$bad bad-policy-accepted"; fi
[ "$(policy)" = fixed ] || bad="$bad kept:$(policy)"
[ "$(metric ve_ved_reload_failures_total)" = 1 ] || bad="$bad failures-counter"
kill -0 "$ved" 2>/dev/null || bad="$bad ved-died"
if [ -z "$bad" ]; then ok ops_reload; else fail ops_reload "$bad $(head -c 300 "$tmp/reload.out")"; fi

# ---- ops_drain_wait
touch "$tmp/stop"
out=$(ctl drain --wait --timeout 60 2>&1)
rc=$?
if [ $rc -eq 0 ] && echo "$out" | grep -q "drained" && [ "$(metric ve_clients)" = 0 ]; then
	ok ops_drain_wait
else
	fail ops_drain_wait "rc $rc: $(echo "$out" | tail -n 3)"
fi
bad=""
for p in "${pids[@]}"; do wait "$p" || bad="$bad client-exit"; done
pids=()
grep -q "busy: .* 0 failed checks" "$tmp/busyA.log" || bad="$bad busyA-checks"
grep -q "busy: .* 0 failed checks" "$tmp/busyB.log" || bad="$bad busyB-checks"

# ---- ops_ved_exit
kill -TERM "$ved"
wait "$ved"
rc=$?
ved=""
if [ $rc -eq 0 ] && [ -z "$bad" ]; then
	ok ops_ved_exit
else
	fail ops_ved_exit "ved rc $rc,$bad: $(grep -iE 'error|abort|violation' "$tmp/ved.log" | head -n 3)"
fi
summary
