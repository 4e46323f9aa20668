#!/usr/bin/env bash
# Compiles eval/ns3/calibrate.cc against Debian's ns-3 (`make ns3` installs it) into $1
# (default target/ns3/calibrate). Exit status 3: ns-3 or g++ is not installed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/../../target/ns3/calibrate}"
modules="ns3-core ns3-network ns3-internet ns3-point-to-point ns3-applications ns3-traffic-control"
if ! command -v g++ >/dev/null || ! pkg-config --exists $modules 2>/dev/null; then
  echo "ns-3 (libns3-dev) or g++ is not installed: run \`make ns3\`" >&2
  exit 3
fi
# Debian's .pc files also name libgsl and libsqlite3 by their development symlinks, which
# libns3-dev does not pull in; the ns-3 libraries alone link.
libs="$(pkg-config --libs $modules | tr ' ' '\n' | grep '^-lns3' | awk '!seen[$0]++' | tr '\n' ' ')"
mkdir -p "$(dirname "$out")"
g++ -std=c++17 -O2 -Wall -o "$out.tmp" "$here/calibrate.cc" $libs
mv "$out.tmp" "$out"
