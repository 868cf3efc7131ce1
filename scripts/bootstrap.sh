#!/usr/bin/env bash
# Installs what earshot needs to build on a fresh Debian 12 machine and builds the
# pinned third-party C/C++ code (ggml, and libwhisper as a test oracle) into
# third_party/install. Idempotent: finished steps are skipped on later runs.
#
# Third-party sources come only from the npm registry, pinned by version and
# checked against their sha512 integrity before use. Nothing foreign is committed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TP="$ROOT/third_party"
JOBS="${JOBS:-$(nproc)}"

# name@version  sha512 integrity (as the npm registry publishes it)
LLAMA_PKG="node-llama-cpp@3.22.1"
LLAMA_SHA512="sha512-bltIipuWmc123H7tMIgDGKSsSrhmhlQYeVUC48XTjVW7XGJJiJJyCdlTMzQ/LiWoPkGDpcL4FviDpgw7qfTiDw=="
WHISPER_PKG="nodejs-whisper@0.3.1"
WHISPER_SHA512="sha512-ceoilUVraRuR5FnNyXpGQT2auAR48Oc3AQBEmkXnVpSn9iN6yVRzQBFCqVTGWbk6Wdi95NhvwXNzFvuR7erLWw=="

APT_PACKAGES=(build-essential cmake ninja-build ccache git pkg-config openssl
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
  libboost-dev libboost-system-dev libssl-dev
  libavformat-dev libavcodec-dev libswresample-dev libavutil-dev ffmpeg sctk
  chromium)

log() { printf '\033[1mbootstrap:\033[0m %s\n' "$*" >&2; }
die() { printf 'bootstrap: error: %s\n' "$*" >&2; exit 1; }

install_debian_packages() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # The machine image ships Node.js with npm; only fall back to Debian's when absent.
  command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  local sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq || die "apt-get update failed: is the Debian mirror reachable?"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install failed for: ${missing[*]}"
}

# fetch_npm NAME@VERSION INTEGRITY -> path of the verified tarball
fetch_npm() {
  local spec="$1" integrity="$2" dir="$TP/npm"
  local name="${spec%@*}" version="${spec##*@}"
  local tgz="$dir/$name-$version.tgz"
  mkdir -p "$dir"
  if [ ! -f "$tgz" ]; then
    log "fetching $spec from the npm registry"
    (cd "$dir" && npm pack --silent "$spec" >/dev/null 2>"$dir/npm-pack.log") \
      || die "could not fetch $spec from the npm registry (see $dir/npm-pack.log). Offline? Place $name-$version.tgz in $dir by hand."
  fi
  local got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [ "$got" != "$integrity" ]; then
    rm -f "$tgz"
    die "$spec: integrity mismatch (expected $integrity, got $got); the tarball was removed"
  fi
  echo "$tgz"
}

unpack_sources() {
  mkdir -p "$TP/src"
  if [ ! -f "$TP/src/llama.cpp/.earshot-ok" ]; then
    local tgz; tgz=$(fetch_npm "$LLAMA_PKG" "$LLAMA_SHA512")
    rm -rf "$TP/src/llama.cpp" "$TP/src/node-llama-cpp"; mkdir -p "$TP/src/node-llama-cpp"
    tar xzf "$tgz" -C "$TP/src/node-llama-cpp" package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
    git clone -q "$TP/src/node-llama-cpp/package/llama/gitRelease.bundle" "$TP/src/llama.cpp" 2>/dev/null \
      || die "could not unpack llama.cpp from the git bundle in $LLAMA_PKG"
    rm -rf "$TP/src/node-llama-cpp"
    touch "$TP/src/llama.cpp/.earshot-ok"
  fi
  if [ ! -f "$TP/src/whisper.cpp/.earshot-ok" ]; then
    local tgz; tgz=$(fetch_npm "$WHISPER_PKG" "$WHISPER_SHA512")
    rm -rf "$TP/src/whisper.cpp" "$TP/src/nodejs-whisper"; mkdir -p "$TP/src/nodejs-whisper"
    tar xzf "$tgz" -C "$TP/src/nodejs-whisper" package/cpp/whisper.cpp
    mv "$TP/src/nodejs-whisper/package/cpp/whisper.cpp" "$TP/src/whisper.cpp"
    rm -rf "$TP/src/nodejs-whisper"
    touch "$TP/src/whisper.cpp/.earshot-ok"
  fi
}

# One ggml for everything: the one inside llama.cpp (0.25.1), which translation
# will need; libwhisper (the test oracle and baseline) is built against it.
# One ggml for everything: the one inside llama.cpp (0.25.1). libllama comes with it
# for translation; libwhisper (the test oracle and baseline) is built against it.
build_ggml() {
  local stamp="$TP/install/.ggml-ok"
  [ -f "$stamp" ] && return 0
  log "building ggml 0.25.1 and libllama (llama.cpp v0.5.0) into third_party/install (a few minutes)"
  cmake -S "$TP/src/llama.cpp" -B "$TP/build/llama" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$TP/install" -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DGGML_NATIVE=ON -DGGML_CCACHE=OFF -DGGML_CUDA="${EARSHOT_CUDA:-OFF}" \
    -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF \
    >"$TP/build/llama.log" 2>&1 || { tail -30 "$TP/build/llama.log"; die "llama.cpp/ggml configure failed"; }
  cmake --build "$TP/build/llama" -j "$JOBS" >>"$TP/build/llama.log" 2>&1 || { tail -30 "$TP/build/llama.log"; die "llama.cpp/ggml build failed"; }
  cmake --install "$TP/build/llama" >>"$TP/build/llama.log" 2>&1 || die "llama.cpp/ggml install failed"
  touch "$stamp"
}

build_whisper() {
  local stamp="$TP/install/.whisper-ok"
  [ -f "$stamp" ] && return 0
  log "building libwhisper 1.9.1 (oracle) against that ggml"
  cmake -S "$TP/src/whisper.cpp" -B "$TP/build/whisper" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$TP/install" -DCMAKE_PREFIX_PATH="$TP/install" -DBUILD_SHARED_LIBS=OFF \
    -DWHISPER_USE_SYSTEM_GGML=ON -DWHISPER_BUILD_TESTS=OFF -DWHISPER_BUILD_EXAMPLES=OFF \
    -DWHISPER_BUILD_SERVER=OFF >"$TP/build/whisper.log" 2>&1 || { tail -30 "$TP/build/whisper.log"; die "whisper configure failed"; }
  cmake --build "$TP/build/whisper" -j "$JOBS" >>"$TP/build/whisper.log" 2>&1 || { tail -30 "$TP/build/whisper.log"; die "whisper build failed"; }
  cmake --install "$TP/build/whisper" >>"$TP/build/whisper.log" 2>&1 || die "whisper install failed"
  mkdir -p "$TP/install/bin"  # whisper-config.cmake insists that it exists
  touch "$stamp"
}

install_debian_packages
mkdir -p "$TP/build"
unpack_sources
build_ggml
build_whisper
log "third-party ready in $TP/install"
