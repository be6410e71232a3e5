#!/usr/bin/env bash
# `meson install` into a scratch DESTDIR, then the installed pieces work: the
# binary runs and serves (inec server from its installed path, inec status
# against it), every man page renders with man -l, the systemd units pass
# systemd-analyze verify, and the bash completion completes.
# argv[1]: the build directory.
set -euo pipefail
build=$1
dest=$(mktemp -d /tmp/inec-install-XXXXXX)
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$dest"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

meson install -C "$build" --no-rebuild --quiet --destdir "$dest" >/dev/null
prefix=$(meson introspect "$build" --buildoptions |
    python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
root=$dest$prefix
inec=$root/bin/inec
[ -x "$inec" ] || fail "no installed binary at $inec"
version=$(meson introspect "$build" --projectinfo | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
[ "$("$inec" --version)" = "inec $version" ] || fail "inec --version: $("$inec" --version)"

# The installed binary serves, and inec status finds it from the data directory.
"$inec" server --data "$dest/data" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
    >"$dest/server.out" 2>"$dest/server.err" &
pid=$!
for _ in $(seq 600); do
    grep -q "admin/v1/cluster" "$dest/server.out" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || fail "the installed server exited: $(cat "$dest/server.err")"
    sleep 0.1
done
out=$("$inec" status --data "$dest/data") || fail "inec status: $out"
grep -q "^health: HEALTH_OK" <<<"$out" || fail "inec status printed: $out"
kill "$pid"
wait "$pid" || fail "the installed server did not stop cleanly"
pid=

# One man page per command, each rendering with a NAME section.
for cmd in "" -server -gateway -node -status -admin -deg -ec -bench -secret -volume -devices; do
    page=$root/share/man/man1/inec$cmd.1
    [ -f "$page" ] || fail "no man page $page"
    text=$(MANWIDTH=80 man -l "$page" 2>&1) || fail "man -l $page: $text"
    grep -q "^NAME" <<<"$text" || fail "$page renders without NAME: $text"
done

# systemd units: valid, pointing at the installed binary, hardened.
units=$root/lib/systemd/system
for unit in inec-server.service inec-gateway.service inec-node@.service; do
    [ -f "$units/$unit" ] || fail "no unit $unit"
    grep -q "^ExecStart=$prefix/bin/inec " "$units/$unit" || fail "$unit runs another binary"
    for key in DynamicUser=yes ProtectSystem=strict NoNewPrivileges=yes StateDirectory=; do
        grep -q "^$key" "$units/$unit" || fail "$unit lacks $key"
    done
done
if command -v systemd-analyze >/dev/null; then
    check=$dest/units
    mkdir -p "$check"
    for unit in inec-server.service inec-gateway.service; do
        sed "s|$prefix/bin/inec|$inec|" "$units/$unit" >"$check/$unit"
    done
    sed "s|$prefix/bin/inec|$inec|" "$units/inec-node@.service" >"$check/inec-node@n1.service"
    out=$(systemd-analyze verify --man=no "$check"/*.service 2>&1) || fail "systemd-analyze: $out"
    [ -z "$out" ] || fail "systemd-analyze verify: $out"
fi

# Bash completion: the commands, and a command's options.
completion=$root/share/bash-completion/completions/inec
[ -f "$completion" ] || fail "no bash completion"
if [ -f /usr/share/bash-completion/bash_completion ]; then
    got=$(bash -c "source /usr/share/bash-completion/bash_completion; source '$completion';
        COMP_WORDS=(inec st); COMP_CWORD=1; COMP_LINE='inec st'; COMP_POINT=7; _inec;
        echo \${COMPREPLY[*]};
        COMP_WORDS=(inec status --js); COMP_CWORD=2; COMP_LINE='inec status --js'; COMP_POINT=16;
        _inec; echo \${COMPREPLY[*]}")
    [ "$(head -1 <<<"$got")" = "status" ] || fail "completion of 'st': $got"
    [ "$(tail -1 <<<"$got")" = "--json" ] || fail "completion of 'status --js': $got"
fi
echo "install: ok ($root)"
