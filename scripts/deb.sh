#!/usr/bin/env bash
# Builds an installable Debian package, dist/inec_VERSION_ARCH.deb: the tested
# build installed (meson install) under /usr into a staging root, its shared
# library dependencies found by dpkg-shlibdeps. It holds the binary, the
# systemd units (installed, not enabled), the man pages, bash completion and
# the docs.   scripts/deb.sh && apt-get install ./dist/inec_*.deb
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
build=${DEB_BUILD:-build-deb}
[ -f "$build/build.ninja" ] ||
    meson setup "$build" --prefix=/usr --buildtype=debugoptimized >/dev/null # as tested
meson compile -C "$build" >/dev/null
version=$(meson introspect "$build" --projectinfo |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
meson install -C "$build" --no-rebuild --quiet --destdir "$stage/root" >/dev/null
strip --strip-unneeded "$stage/root/usr/bin/inec"
gzip -9n "$stage"/root/usr/share/man/man1/*.1
# dpkg-shlibdeps reads debian/control from the directory it runs in.
mkdir -p "$stage/debian" "$stage/root/DEBIAN"
printf 'Source: inec\n\nPackage: inec\nArchitecture: any\n' >"$stage/debian/control"
depends=$(cd "$stage" && dpkg-shlibdeps -O root/usr/bin/inec 2>/dev/null |
    sed -n 's/^shlibs:Depends=//p')
cat >"$stage/root/DEBIAN/control" <<CONTROL
Package: inec
Version: $version
Architecture: $arch
Maintainer: inec developers <inec@localhost>
Installed-Size: $(du -sk "$stage/root" | cut -f1)
Depends: $depends
Recommends: graphviz
Section: net
Priority: optional
Description: erasure-coded S3 object storage gateway
 inec serves S3 and spreads every stripe of every object over storage nodes
 with an erasure code (Reed-Solomon, LRC, PPR, ECPipe, TriEC), moving and
 computing every stripe through Dynamic EC Graphs of coherent in-network EC
 primitives (the INEC paper, SC20). The package holds the inec command, systemd
 units for inec server, inec gateway and inec node, man pages and bash
 completion.
CONTROL
mkdir -p dist
out=dist/inec_${version}_${arch}.deb
dpkg-deb --build --root-owner-group "$stage/root" "$out" >/dev/null
echo "$out"
