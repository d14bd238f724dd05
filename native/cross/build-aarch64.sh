#!/bin/sh
# Cross-build mgerun-native for aarch64 Linux on an x86_64 Debian host (docs/native.md, "aarch64").
#
#   native/cross/build-aarch64.sh [--zig] BUILD_DIR [CMAKE_ARG...]
#
# --zig: compile with zig (ziglang from PyPI, installed into BUILD_DIR/zig with pip) against glibc 2.17, libc++
# linked statically (aarch64-zig.cmake); else Debian's GCC 12 cross compiler (aarch64-linux-gnu.cmake).
#
# Needs Debian's cross compiler (apt-get install g++-aarch64-linux-gnu) and cmake. Fetches the target's
# libssl-dev (static libcrypto.a and its headers) from Debian's arm64 archive into BUILD_DIR/deps, checked
# by apt's own signatures, with a private apt state under BUILD_DIR: the host's package lists and dpkg
# architectures are left as they are (no `dpkg --add-architecture`). The binary is BUILD_DIR/mgerun-native;
# native/CMakeLists.txt is used as it is.
set -eu

compiler=gcc
if [ "${1:-}" = "--zig" ]; then
  compiler=zig
  shift
fi
if [ $# -lt 1 ]; then
  echo "usage: $0 [--zig] BUILD_DIR [CMAKE_ARG...]" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
build=$1
shift
mkdir -p "$build"
build=$(cd "$build" && pwd)

if [ "$compiler" = zig ]; then
  tools="python3 cmake apt-get dpkg-deb"
else
  tools="aarch64-linux-gnu-g++ cmake apt-get dpkg-deb"
fi
for tool in $tools; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "$0: $tool not found (apt-get install g++-aarch64-linux-gnu cmake)" >&2
    exit 2
  fi
done

# A private apt state for the arm64 archive of the release this host runs.
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
apt_dir="$build/apt"
deps="$build/deps"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/parts" "$apt_dir/debs"
: >"$apt_dir/status"
cat >"$apt_dir/sources.list" <<SOURCES
deb [arch=arm64 signed-by=$keyring] http://deb.debian.org/debian $suite main
deb [arch=arm64 signed-by=$keyring] http://deb.debian.org/debian-security $suite-security main
SOURCES
apt_opts="-q -o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o APT::Sandbox::User=root
  -o Dir::State::Lists=$apt_dir/lists -o Dir::State::status=$apt_dir/status -o Dir::Cache=$apt_dir/cache
  -o Dir::Etc::SourceList=$apt_dir/sources.list -o Dir::Etc::SourceParts=$apt_dir/parts"
if [ ! -f "$apt_dir/updated" ]; then
  # shellcheck disable=SC2086
  apt-get $apt_opts update >"$apt_dir/update.log" 2>&1 || {
    echo "$0: apt-get update of the arm64 archive failed: see $apt_dir/update.log" >&2
    exit 2
  }
  : >"$apt_dir/updated"
fi
if [ ! -f "$deps/unpacked" ]; then
  rm -rf "$deps" "$apt_dir/debs"
  mkdir -p "$deps" "$apt_dir/debs"
  # shellcheck disable=SC2086
  (cd "$apt_dir/debs" && apt-get $apt_opts download libssl-dev >"$apt_dir/download.log" 2>&1) || {
    echo "$0: apt-get download of libssl-dev:arm64 failed: see $apt_dir/download.log" >&2
    exit 2
  }
  for deb in "$apt_dir"/debs/*.deb; do
    dpkg-deb -x "$deb" "$deps"
  done
  (cd "$apt_dir/debs" && sha256sum ./*.deb) >"$deps/ORIGIN"
  : >"$deps/unpacked"
fi

if [ "$compiler" = zig ]; then
  zig="$build/zig"
  if [ ! -f "$zig/py/ziglang/__init__.py" ]; then
    python3 -m pip install --quiet --disable-pip-version-check --target "$zig/py" ziglang || {
      echo "$0: pip install ziglang failed" >&2
      exit 2
    }
  fi
  mkdir -p "$zig/bin"
  for pair in "cc:cc -target aarch64-linux-gnu.2.17" "c++:c++ -target aarch64-linux-gnu.2.17" "ar:ar" "ranlib:ranlib"; do
    printf '#!/bin/sh\nPYTHONPATH="%s" exec python3 -m ziglang %s "$@"\n' "$zig/py" "${pair#*:}" >"$zig/bin/zig-${pair%%:*}"
    chmod +x "$zig/bin/zig-${pair%%:*}"
  done
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_TOOLCHAIN_FILE="$here/aarch64-zig.cmake" -DMGERUN_AARCH64_DEPS="$deps" -DMGERUN_ZIG_BIN="$zig/bin" "$@"
else
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_TOOLCHAIN_FILE="$here/aarch64-linux-gnu.cmake" -DMGERUN_AARCH64_DEPS="$deps" "$@"
fi
cmake --build "$build" --parallel
