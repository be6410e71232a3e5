#!/usr/bin/env bash
# A local multi-process cluster for tests and demos:
#   scripts/cluster.sh start N [DIR]   N `inec node` processes (default 9) + a gateway
#   scripts/cluster.sh stop [DIR]      SIGTERM everything it started
#   scripts/cluster.sh status [DIR]    which processes are alive
# DIR (default ./inec-cluster, or $INEC_CLUSTER_DIR) gets cluster.json (the map,
# each node's data directory, the gateway section), cluster.secret (mode 0600:
# what every node and the gateway prove to each other, `inec secret`), node-I/
# data, logs and pids.
# Environment: INEC (the binary, default build/cli/inec), INEC_PROFILE
# (rs:k=6,m=3, or k=N-3 when N < 9), INEC_CHUNK (4194304), INEC_NO_GATEWAY=1
# (nodes only: tests drive the object layer themselves), INEC_BASE_PORT,
# INEC_NODE_CONFIG (JSON: cluster.json's "node" section, e.g. compaction),
# INEC_HOST (the address every process listens on, 127.0.0.1; ::1 or another
# IPv6 address makes an IPv6 cluster).
set -euo pipefail

cmd=${1:-}
shift || true
INEC=${INEC:-build/cli/inec}


# Alive, not a zombie (a killed node whose parent script is gone may linger as
# one), and still ours: pids wrap around (pid_max may be 32768), so the pid file
# of a node that died a while ago may name an unrelated process by now (stop
# would SIGTERM it, start would not restart the node). Ours run with
# --config DIR/cluster.json, DIR being the pid file's (absolute) folder.
pid_alive() {
    [ -f "$1" ] || return 1
    local pid st
    pid=$(cat "$1")
    st=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ] || return 1
    tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "$(dirname "$1")/cluster.json"
}

case "$cmd" in
start)
    n=${1:-9}
    dir=${2:-${INEC_CLUSTER_DIR:-./inec-cluster}}
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ -z "${INEC_PROFILE:-}" ]; then
        if [ "$n" -ge 9 ]; then INEC_PROFILE="rs:k=6,m=3"; else INEC_PROFILE="rs:k=$((n - 3)),m=3"; fi
    fi
    if [ ! -f "$dir/cluster.json" ]; then
        python3 - "$dir" "$n" "$INEC_PROFILE" "${INEC_CHUNK:-4194304}" <<'EOF'
import json, os, random, socket, sys
d, n, profile, chunk = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
host = os.environ.get("INEC_HOST") or "127.0.0.1"
v6 = ":" in host
at = f"[{host}]" if v6 else host  # HOST:PORT with an IPv6 HOST in brackets
taken = set()
def port():
    # Below the kernel's ephemeral range (32768+): a port that bind(0) hands out
    # can be taken by any outgoing connection before the node binds it.
    for _ in range(1000):
        p = random.randrange(20000, 32000)
        # getaddrinfo: a link-local host's scope (fe80::1%eth0) into the address
        fam, typ, _, _, addr = socket.getaddrinfo(host, p, type=socket.SOCK_STREAM)[0]
        s = socket.socket(fam, typ)
        try:
            s.bind(addr)
        except OSError:
            continue
        finally:
            s.close()
        if p not in taken:
            taken.add(p)
            return p
    sys.exit(f"cluster.sh: cannot bind any port on {host} (INEC_HOST)")
nodes = [{"id": f"n{i}", "address": f"{at}:{port()}"} for i in range(n)]
cfg = {"secret_file": "cluster.secret",
       "map": {"nodes": nodes,
               "pools": [{"name": "default", "profile": profile, "chunk_size": chunk}]},
       "nodes": {f"n{i}": {"data": f"{d}/node-{i}"} for i in range(n)},
       "gateway": {"listen": f"{at}:{port()}", "admin_listen": f"{at}:{port()}", "deg_listen": at,
                   "data": f"{d}/gateway"}}
if os.environ.get("INEC_NODE_CONFIG"):
    cfg["node"] = json.loads(os.environ["INEC_NODE_CONFIG"])
json.dump(cfg, open(f"{d}/cluster.json", "w"), indent=2)
EOF
    fi
    # The cluster secret, made once (0600) before any process starts.
    [ -f "$dir/cluster.secret" ] || "$INEC" secret init "$dir/cluster.secret" >/dev/null
    ids=$(python3 -c 'import json,sys; print(" ".join(n["id"] for n in json.load(open(sys.argv[1]))["map"]["nodes"]))' "$dir/cluster.json")
    for id in $ids; do
        if pid_alive "$dir/$id.pid"; then continue; fi
        "$INEC" node run --config "$dir/cluster.json" --id "$id" >"$dir/$id.log" 2>&1 &
        echo $! >"$dir/$id.pid"
    done
    for id in $ids; do # each prints "listening" once it serves
        for _ in $(seq 100); do
            grep -q '^listening' "$dir/$id.log" 2>/dev/null && break
            pid_alive "$dir/$id.pid" || { echo "node $id failed:" >&2; cat "$dir/$id.log" >&2; exit 1; }
            sleep 0.1
        done
        grep -q '^listening' "$dir/$id.log" || { echo "node $id did not start" >&2; exit 1; }
    done
    if [ -z "${INEC_NO_GATEWAY:-}" ] && ! pid_alive "$dir/gateway.pid"; then
        "$INEC" gateway --config "$dir/cluster.json" >"$dir/gateway.log" 2>&1 &
        echo $! >"$dir/gateway.pid"
    fi
    echo "cluster: $dir/cluster.json"
    ;;
stop)
    dir=${1:-${INEC_CLUSTER_DIR:-./inec-cluster}}
    dir=$(cd "$dir" 2>/dev/null && pwd) || exit 0
    for p in "$dir"/*.pid; do
        [ -f "$p" ] || continue
        pid=$(cat "$p")
        if pid_alive "$p" && kill -TERM "$pid" 2>/dev/null; then
            for _ in $(seq 100); do pid_alive "$p" || break; sleep 0.1; done
            if pid_alive "$p"; then kill -KILL "$pid" 2>/dev/null || true; fi
        fi
        rm -f "$p"
    done
    ;;
status)
    dir=${1:-${INEC_CLUSTER_DIR:-./inec-cluster}}
    dir=$(cd "$dir" 2>/dev/null && pwd) || { echo "no cluster in ${1:-${INEC_CLUSTER_DIR:-./inec-cluster}}" >&2; exit 1; }
    rc=0
    for p in "$dir"/*.pid; do
        [ -f "$p" ] || continue
        name=$(basename "$p" .pid)
        if pid_alive "$p"; then echo "$name up (pid $(cat "$p"))"; else echo "$name down"; rc=1; fi
    done
    exit $rc
    ;;
*)
    echo "usage: $0 start [N] [DIR] | stop [DIR] | status [DIR]" >&2
    exit 2
    ;;
esac
