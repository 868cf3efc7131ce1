#!/usr/bin/env bash
# Installs what earshot needs to build on a fresh Debian 12 machine and builds the
# pinned third-party C/C++ code (ggml; libllama + libmtmd; libwhisper and libparakeet
# as test oracles) into third_party/install. Idempotent: finished steps are skipped on later runs.
#
# Third-party sources come only from the npm registry, pinned by version and
# checked against their sha512 integrity before use. Nothing foreign is committed.
#
# EARSHOT_CUDA=ON builds ggml with its CUDA backend into third_party/install-cuda
# instead (CMake: -DEARSHOT_CUDA=ON). nvcc is looked up on PATH, then in
# /usr/local/cuda. EARSHOT_CUDA_ARCHITECTURES picks the GPU architectures
# (default: the GPUs present, or 90 when none is visible, e.g. on a build machine).
#
# ggml is built with llamafile's tinyBLAS kernels (as llama.cpp builds it): the
# encoder is a third faster. EARSHOT_GGML_LLAMAFILE=OFF builds ggml's own kernels
# instead, where a batched decoder step equals the same step alone bit for bit
# (with tinyBLAS, to rounding: docs/architecture.md, "Batched decoding";
# docs/development.md, "Build options").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TP="$ROOT/third_party"
JOBS="${JOBS:-$(nproc)}"
source "$ROOT/scripts/common.sh"
if earshot_cuda_enabled; then CUDA=ON; FLAVOR="-cuda"; else CUDA=OFF; FLAVOR=""; fi
INSTALL="$TP/install$FLAVOR"
LLAMAFILE="${EARSHOT_GGML_LLAMAFILE:-ON}"  # OFF: see docs/development.md "Build options"
case "$LLAMAFILE" in ON | OFF) ;; *) echo "EARSHOT_GGML_LLAMAFILE must be ON or OFF, not '$LLAMAFILE'" >&2; exit 2 ;; esac
# On CPUs with AVX512-FP16 (Intel Sapphire Rapids and later) ggml's F16 vector code
# (one-column products such as every decoder step, F16 attention) multiplies AND
# accumulates in half precision: dot products over hundreds of elements lose
# about three digits (Silero VAD probabilities off by 4e-3, Whisper logits by
# 2e-2 against the same ggml elsewhere). The same class of defect as llama.cpp
# issue 11920 (ARM fp16fml). earshot builds ggml without that path
# (-U__AVX512FP16__: F32 accumulation, as on every other x86 CPU);
# EARSHOT_GGML_FP16_ACCUMULATE=ON keeps ggml's own choice.
FP16_ACCUMULATE="${EARSHOT_GGML_FP16_ACCUMULATE:-OFF}"
case "$FP16_ACCUMULATE" in ON | OFF) ;; *) echo "EARSHOT_GGML_FP16_ACCUMULATE must be ON or OFF, not '$FP16_ACCUMULATE'" >&2; exit 2 ;; esac
GGML_C_FLAGS=""
[ "$FP16_ACCUMULATE" = OFF ] && GGML_C_FLAGS="-U__AVX512FP16__"
# On CPUs with AMX-INT8 (Sapphire Rapids and later) -march=native also builds ggml's
# AMX kernels, and earshot uses them (runtime/amx.h puts quantised projections there
# under --cpu-kernels auto: 1.5-1.7x a quantised streaming transducer's batched steps;
# libllama's Q4_0/Q8_0 translation and Qwen3-ASR weights go there too). libwhisper and
# libparakeet (the parity oracles) would put every CPU weight, f16 included, in ggml's
# AMX buffer, whose f16 products multiply f32 activations where ggml's other kernels
# round them to f16 (same-mel logits 7e-3 apart instead of 1e-5): the oracle processes
# deny themselves AMX (tools/common/oracle_without_amx.h), so both sides run the same
# kernels there. cmake/ggml works around GCC 12's miscompilation of the AMX tile
# configuration. EARSHOT_GGML_AMX=OFF builds ggml without them (-mno-amx-*: the same
# code as on every other x86 CPU).
AMX="${EARSHOT_GGML_AMX:-ON}"
# EARSHOT_GGML_NATIVE=OFF builds ggml's CPU code for any x86-64 CPU with AVX2 and FMA
# (x86-64-v3) instead of this machine's: for binaries that run on another machine,
# such as a CUDA build made here for a GPU machine whose CPU may lack this one's
# AVX-512 or AMX (scripts/gpu-check.sh).
NATIVE="${EARSHOT_GGML_NATIVE:-ON}"
case "$NATIVE" in ON | OFF) ;; *) echo "EARSHOT_GGML_NATIVE must be ON or OFF, not '$NATIVE'" >&2; exit 2 ;; esac
if [ "$NATIVE" = ON ]; then GGML_CPU_ARGS="-DGGML_NATIVE=ON"
else GGML_CPU_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"; fi
case "$AMX" in ON | OFF) ;; *) echo "EARSHOT_GGML_AMX must be ON or OFF, not '$AMX'" >&2; exit 2 ;; esac
[ "$AMX" = OFF ] && GGML_C_FLAGS="$GGML_C_FLAGS -mno-amx-tile -mno-amx-int8 -mno-amx-bf16"

# name@version  sha512 integrity (as the npm registry publishes it)
LLAMA_PKG="node-llama-cpp@3.22.1"
LLAMA_SHA512="sha512-bltIipuWmc123H7tMIgDGKSsSrhmhlQYeVUC48XTjVW7XGJJiJJyCdlTMzQ/LiWoPkGDpcL4FviDpgw7qfTiDw=="
WHISPER_PKG="nodejs-whisper@0.3.1"
WHISPER_SHA512="sha512-ceoilUVraRuR5FnNyXpGQT2auAR48Oc3AQBEmkXnVpSn9iN6yVRzQBFCqVTGWbk6Wdi95NhvwXNzFvuR7erLWw=="

APT_PACKAGES=(build-essential cmake ninja-build ccache git pkg-config openssl
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
  libboost-dev libboost-system-dev libssl-dev
  libavformat-dev libavcodec-dev libswresample-dev libavutil-dev ffmpeg sctk libopenblas-dev
  chromium clang libclang-rt-14-dev nginx systemd python3-numpy python3-torch python3-yaml
  python3-websockets)

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

# One ggml for everything: the one inside llama.cpp v0.5.0 (ggml 0.25.1), built on
# its own (llama.cpp's ggml/ folder is a standalone project). libwhisper (the test
# oracle and baseline) and libllama/libmtmd (LLAMA_USE_SYSTEM_GGML) are built
# against it: one ggml in every binary.
cuda_args() {
  [ "$CUDA" = ON ] || { echo "-DGGML_CUDA=OFF"; return 0; }
  local nvcc; nvcc=$(command -v nvcc || true)
  [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
  [ -n "$nvcc" ] || die "EARSHOT_CUDA=ON needs the CUDA toolkit (nvcc not on PATH nor in /usr/local/cuda/bin)"
  local arch="${EARSHOT_CUDA_ARCHITECTURES:-}"
  if [ -z "$arch" ]; then
    if nvidia-smi -L >/dev/null 2>&1; then arch=native; else arch=90; fi
  fi
  # FlashAttention kernels off: they are most of ggml-cuda's compile time; without
  # them the session's encoder uses the explicit softmax on CUDA.
  echo "-DGGML_CUDA=ON -DCMAKE_CUDA_COMPILER=$nvcc -DCMAKE_CUDA_ARCHITECTURES=$arch -DGGML_CUDA_FA=OFF"
}

# Documented patches to the pinned llama.cpp tree (cmake/ggml/patches/*.patch, each
# one explained in its own header and in docs/development.md "Patches to ggml"),
# applied in name order on the pristine tree; their digest is part of the recipes.
PATCHES=("$ROOT"/cmake/ggml/patches/*.patch)
[ -e "${PATCHES[0]}" ] || PATCHES=()
PATCHES_ID="none"
[ ${#PATCHES[@]} -gt 0 ] && PATCHES_ID=$(cat "${PATCHES[@]}" | openssl dgst -sha256 -r | cut -c1-16)

# A stamp holds the recipe it was made with: a changed recipe rebuilds.
GGML_RECIPE="ggml 0.25.1 standalone from llama.cpp v0.5.0; $(cuda_args) -DGGML_LLAMAFILE=$LLAMAFILE; C flags '$GGML_C_FLAGS'"
[ "$PATCHES_ID" = none ] || GGML_RECIPE="$GGML_RECIPE; patches $PATCHES_ID"
[ "$NATIVE" = ON ] || GGML_RECIPE="$GGML_RECIPE; $GGML_CPU_ARGS"
WHISPER_RECIPE="whisper.cpp 1.9.1 on $GGML_RECIPE"
LLAMA_RECIPE="libllama + libmtmd from llama.cpp v0.5.0 on $GGML_RECIPE"
stamp_ok() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }

build_ggml() {
  local stamp="$INSTALL/.ggml-ok"
  stamp_ok "$stamp" "$GGML_RECIPE" && return 0
  rm -rf "$INSTALL" "$TP/build/ggml$FLAVOR" "$TP/build/whisper$FLAVOR" "$TP/build/llama$FLAVOR"
  log "building ggml 0.25.1 (from llama.cpp v0.5.0, CUDA $CUDA) into ${INSTALL#$ROOT/} (a few minutes)"
  # shellcheck disable=SC2046  # word splitting of the argument list is intended
  cmake -S "$ROOT/cmake/ggml" -B "$TP/build/ggml$FLAVOR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DEARSHOT_GGML_SOURCE="$TP/src/llama.cpp/ggml" \
    -DCMAKE_INSTALL_PREFIX="$INSTALL" -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    $GGML_CPU_ARGS -DGGML_CCACHE=OFF -DGGML_LLAMAFILE="$LLAMAFILE" $(cuda_args) \
    -DCMAKE_C_FLAGS="$GGML_C_FLAGS" -DCMAKE_CXX_FLAGS="$GGML_C_FLAGS" \
    -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF \
    >"$TP/build/ggml$FLAVOR.log" 2>&1 || { tail -30 "$TP/build/ggml$FLAVOR.log"; die "ggml configure failed"; }
  cmake --build "$TP/build/ggml$FLAVOR" -j "$JOBS" >>"$TP/build/ggml$FLAVOR.log" 2>&1 \
    || { tail -30 "$TP/build/ggml$FLAVOR.log"; die "ggml build failed"; }
  cmake --install "$TP/build/ggml$FLAVOR" >>"$TP/build/ggml$FLAVOR.log" 2>&1 || die "ggml install failed"
  echo "$GGML_RECIPE" >"$stamp"
}

build_whisper() {
  local stamp="$INSTALL/.whisper-ok" log_file="$TP/build/whisper$FLAVOR.log"
  stamp_ok "$stamp" "$WHISPER_RECIPE" && return 0
  log "building libwhisper 1.9.1 (oracle) against that ggml"
  cmake -S "$TP/src/whisper.cpp" -B "$TP/build/whisper$FLAVOR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$INSTALL" -DCMAKE_PREFIX_PATH="$INSTALL" -DBUILD_SHARED_LIBS=OFF \
    -DWHISPER_USE_SYSTEM_GGML=ON -DWHISPER_BUILD_TESTS=OFF -DWHISPER_BUILD_EXAMPLES=OFF \
    -DWHISPER_BUILD_SERVER=OFF >"$log_file" 2>&1 || { tail -30 "$log_file"; die "whisper configure failed"; }
  cmake --build "$TP/build/whisper$FLAVOR" -j "$JOBS" >>"$log_file" 2>&1 || { tail -30 "$log_file"; die "whisper build failed"; }
  cmake --install "$TP/build/whisper$FLAVOR" >>"$log_file" 2>&1 || die "whisper install failed"
  mkdir -p "$INSTALL/bin"  # whisper-config.cmake insists that it exists
  echo "$WHISPER_RECIPE" >"$stamp"
}

# libllama (translation models, Qwen3-ASR's decoder) and libmtmd (Qwen3-ASR's audio
# encoder) against the same installed ggml (LLAMA_USE_SYSTEM_GGML): one ggml in the
# binary. Only the libraries: no common/, tools, tests, server, network code.
build_llama() {
  local stamp="$INSTALL/.llama-ok" log_file="$TP/build/llama$FLAVOR.log" dir="$TP/build/llama$FLAVOR"
  stamp_ok "$stamp" "$LLAMA_RECIPE" && return 0
  log "building libllama + libmtmd (llama.cpp v0.5.0) against that ggml"
  cmake -S "$TP/src/llama.cpp" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$INSTALL" -DCMAKE_PREFIX_PATH="$INSTALL" -DBUILD_SHARED_LIBS=OFF \
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DLLAMA_USE_SYSTEM_GGML=ON -DLLAMA_BUILD_MTMD=ON \
    -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF \
    >"$log_file" 2>&1 || { tail -30 "$log_file"; die "llama.cpp configure failed"; }
  cmake --build "$dir" -j "$JOBS" --target llama mtmd >>"$log_file" 2>&1 \
    || { tail -30 "$log_file"; die "libllama/libmtmd build failed"; }
  cmake --install "$dir" >>"$log_file" 2>&1 || die "libllama install failed"
  # libmtmd links llama.cpp's vendored hash library privately; a static consumer needs
  # it too, and llama.cpp does not install it.
  cp "$dir/vendor/hash/libvendor-hash.a" "$INSTALL/lib/" || die "libvendor-hash.a not found in $dir"
  echo "$LLAMA_RECIPE" >"$stamp"
}

# Puts the llama.cpp tree (a git checkout of the pinned bundle) in the state the
# patches describe: pristine files, then every patch; a marker holds their digest.
apply_patches() {
  local tree="$TP/src/llama.cpp" marker="$TP/src/llama.cpp/.earshot-patches"
  [ -f "$marker" ] && [ "$(cat "$marker")" = "$PATCHES_ID" ] && return 0
  git -C "$tree" checkout -q -- . || die "could not restore the pristine llama.cpp tree in $tree"
  local p
  for p in "${PATCHES[@]}"; do
    log "patching llama.cpp: ${p#$ROOT/}"
    git -C "$tree" apply "$p" || die "patch ${p#$ROOT/} does not apply to llama.cpp v0.5.0"
  done
  echo "$PATCHES_ID" >"$marker"
}

install_debian_packages
mkdir -p "$TP/build"
unpack_sources
apply_patches
build_ggml
build_whisper
build_llama
log "third-party ready in ${INSTALL#$ROOT/}"
