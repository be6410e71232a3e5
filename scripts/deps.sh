#!/usr/bin/env bash
# Installs the Debian packages inec needs (make included: on a bare debian:12,
# scripts/make calls this before make exists). Idempotent: it asks dpkg first
# and only calls apt-get for what is missing, so a second run takes a moment.
set -euo pipefail

packages=(
    make meson ninja-build pkg-config gcc libc6-dev clang libclang-rt-dev
    libisal-dev liburing-dev libjansson-dev libcmocka-dev libibverbs-dev
    liblmdb-dev libmicrohttpd-dev libgnutls28-dev libssl-dev libexpat1-dev libcurl4-openssl-dev openssl
    python3 python3-boto3 python3-websocket awscli gnuplot-nox graphviz chromium scdoc
    libnbd-bin python3-libnbd qemu-utils fio rclone s3cmd s3fs
)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# node and npm for the AWS SDK for JavaScript suite: any install will do
# (Debian's, or NodeSource's, whose nodejs carries npm and conflicts with Debian's npm)
{ command -v node && command -v npm; } >/dev/null 2>&1 || missing+=(nodejs npm)
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
