#!/usr/bin/env bash
# `inec ec` end to end on real files: encode, lose and corrupt chunks, decode,
# compare; too many losses fail clearly and write nothing; the printed matrix
# and the manifest CRCs agree with an independent Python computation.
set -euo pipefail
INEC=${1:?usage: ec_roundtrip.sh path/to/inec}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
flip() { # flip one byte of file $1 at offset $2
    python3 - "$1" "$2" <<'PY'
import sys
p, off = sys.argv[1], int(sys.argv[2])
with open(p, 'r+b') as f:
    f.seek(off); b = f.read(1); f.seek(off); f.write(bytes([b[0] ^ 0xFF]))
PY
}

"$INEC" ec --help | grep -q encode || fail "ec --help"
for sub in encode decode matrix; do
    "$INEC" ec $sub --help | grep -q "usage: inec ec $sub" || fail "ec $sub --help"
done

head -c 5000011 /dev/urandom > "$T/file"

# RS(6,3): lose a data and a parity chunk, corrupt another data chunk: 3 = m.
"$INEC" ec encode --profile rs:k=6,m=3 "$T/file" -o "$T/rs" >/dev/null
[ "$(ls "$T/rs" | grep -c '^chunk\.')" = 9 ] || fail "expected 9 chunk files"
rm "$T/rs/chunk.01" "$T/rs/chunk.07"
flip "$T/rs/chunk.04" 12345
"$INEC" ec decode "$T/rs" -o "$T/out" > "$T/log"
grep -q 'chunk  1 chunk.01: missing' "$T/log" || fail "missing chunk 1 not reported"
grep -q 'chunk  4 chunk.04: corrupt' "$T/log" || fail "corrupt chunk 4 not reported"
cmp "$T/file" "$T/out" || fail "rs decode differs"

# A fourth loss: unrecoverable, non-zero exit, nothing written.
truncate -s 10 "$T/rs/chunk.00"
if "$INEC" ec decode "$T/rs" -o "$T/out2" > "$T/log" 2>&1; then fail "decode of 4 losses succeeded"; fi
grep -q 'chunk  0 chunk.00: corrupt (size 10' "$T/log" || fail "short chunk not reported"
grep -q 'NOT recoverable' "$T/log" || fail "no clear failure message"
[ ! -e "$T/out2" ] && ! ls "$T" | grep -q 'out2.tmp' || fail "output written on failure"

# LRC(6,2,2): a lone loss, then a recoverable 4-loss pattern, then a group too many.
"$INEC" ec encode --profile lrc:k=6,l=2,r=2 "$T/file" -o "$T/lrc" >/dev/null
cp -r "$T/lrc" "$T/lrc.orig"
rm "$T/lrc/chunk.02"
"$INEC" ec decode "$T/lrc" -o "$T/out3" >/dev/null
cmp "$T/file" "$T/out3" || fail "lrc single loss"
rm "$T/lrc/chunk.03" "$T/lrc/chunk.08"
flip "$T/lrc/chunk.09" 0
"$INEC" ec decode "$T/lrc" -o "$T/out4" >/dev/null
cmp "$T/file" "$T/out4" || fail "lrc 4 losses"
rm -r "$T/lrc" && cp -r "$T/lrc.orig" "$T/lrc"
rm "$T/lrc/chunk.00" "$T/lrc/chunk.01" "$T/lrc/chunk.02" "$T/lrc/chunk.06"
if "$INEC" ec decode "$T/lrc" -o "$T/out5" > "$T/log" 2>&1; then fail "lrc: whole group lost but decoded"; fi
grep -q 'NOT recoverable' "$T/log" && [ ! -e "$T/out5" ] || fail "lrc failure unclear"

# Tiny and empty files.
for size in 0 1 7; do
    head -c $size /dev/urandom > "$T/small"
    "$INEC" ec encode --profile rs:k=3,m=2 "$T/small" -o "$T/s$size" >/dev/null
    rm "$T/s$size/chunk.00"
    "$INEC" ec decode "$T/s$size" -o "$T/small.out" >/dev/null
    cmp "$T/small" "$T/small.out" || fail "size $size"
done

# The matrix and the manifest against an independent GF(2^8) / CRC32C.
for profile in rs:k=6,m=3 lrc:k=6,l=2,r=2; do
    head -c 6000 /dev/urandom > "$T/m.in"
    rm -rf "$T/m"
    "$INEC" ec encode --profile $profile "$T/m.in" -o "$T/m" >/dev/null
    "$INEC" ec matrix --profile $profile > "$T/matrix"
    python3 - "$T/m" "$T/matrix" <<'PY' || fail "matrix/manifest check for $profile"
import json, sys
d, mfile = sys.argv[1], sys.argv[2]
def mul(a, b):
    r = 0
    while b:
        if b & 1: r ^= a
        a <<= 1
        if a & 0x100: a ^= 0x11d
        b >>= 1
    return r
def crc32c(data):
    c = 0xFFFFFFFF
    for x in data:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF
man = json.load(open(d + "/manifest.json"))
rows = [[int(v) for v in line.split()] for line in open(mfile)]
chunks = [open(d + "/" + c["file"], "rb").read() for c in man["chunks"]]
k = len(rows[0])
assert len(rows) + k == len(chunks), "matrix shape"
for i, row in enumerate(rows):
    want = bytearray(len(chunks[0]))
    for j, g in enumerate(row):
        for b, x in enumerate(chunks[j]):
            want[b] ^= mul(g, x)
    assert bytes(want) == chunks[k + i], "parity %d differs from matrix row" % i
for c, data in zip(man["chunks"], chunks):
    assert crc32c(data) == c["crc32c"], "crc of " + c["file"]
PY
done

# Bad input: clear error, non-zero exit.
if "$INEC" ec encode --profile rs:k=0,m=3 "$T/file" -o "$T/bad" 2> "$T/log"; then fail "k=0 accepted"; fi
grep -q 'k=0' "$T/log" || fail "k=0 message"
if "$INEC" ec matrix --profile lrc:k=5,l=2,r=2 2> "$T/log"; then fail "lrc k%l accepted"; fi
if "$INEC" ec decode "$T/nonexistent" -o "$T/x" 2> /dev/null; then fail "missing dir accepted"; fi
echo "ec_roundtrip: ok"
