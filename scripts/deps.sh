#!/usr/bin/env bash
# Installs the Debian packages inec needs. Idempotent: it asks dpkg first and
# only calls apt-get for what is missing, so a second run takes a moment.
set -euo pipefail

packages=(
    meson ninja-build pkg-config gcc
    libisal-dev liburing-dev libjansson-dev libcmocka-dev
    liblmdb-dev libmicrohttpd-dev libssl-dev
    python3 python3-boto3 awscli gnuplot-nox graphviz
)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
