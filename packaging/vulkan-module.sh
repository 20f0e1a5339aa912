#!/usr/bin/env bash
# Build llama.cpp's Vulkan backend (libggml-vulkan.so) for the llama-cpp-python in Ember's
# environment and put it beside the CPU variants in llama_cpp/lib, where Ember's GPU pick looks.
#
#   bash packaging/vulkan-module.sh           after `uv sync`: build (or reuse) and install it
#   bash packaging/vulkan-module.sh --check   only say whether it can be built here
#   bash packaging/vulkan-module.sh --force   replace a libggml-vulkan.so already there
#
# Why a separate step: `uv sync` cannot build it. pyproject's config settings are one fixed list,
# and -DGGML_VULKAN=ON there would make every `uv sync` fail on a machine without the Vulkan
# tools (ggml's find_package(Vulkan ... REQUIRED)). This builds the same llama.cpp source that
# llama-cpp-python vendors (its sdist: uv's cache, else PyPI), only the ggml-vulkan target, so the
# module matches the installed libggml-base (same ggml version, same backend API).
#
# Needs glslc, the SPIR-V headers (CMake config), a Vulkan loader (libvulkan.so.1), cmake, a C++
# compiler and Vulkan headers >= 1.3.272. Debian 12's headers are 1.3.239: there the headers of
# Debian 13's libvulkan-dev are downloaded once and used for the compile only (the system's loader
# is still what is linked and run). Where something is missing this prints one line of advice and
# exits 0: Ember then runs on the CPU, as before.
#
# Built modules are cached in ${XDG_CACHE_HOME:-~/.cache}/ember/vulkan-module/KEY/ (KEY: the
# llama-cpp-python, Vulkan header and glslc versions), so a second run takes seconds.
# Environment: EMBER_PYTHON (the environment's python; default .venv/bin/python), EMBER_GLSLC
# (default glslc), EMBER_VULKAN_INCLUDE (the Vulkan headers' include folder; default
# $VULKAN_SDK/include or /usr/include), EMBER_VULKAN_JOBS (parallel jobs; default 2).
set -euo pipefail
export LC_ALL=C # the same glob order everywhere
cd "$(dirname "$0")/.."

MIN_HEADERS=1.3.272 # VK_EXT_layer_settings, which ggml-vulkan.cpp uses
# Debian 13's libvulkan-dev: only its headers are used (its libvulkan1 needs glibc 2.38).
TRIXIE_VERSION=1.4.309
TRIXIE_DEB=${EMBER_VULKAN_HEADERS_DEB:-http://deb.debian.org/debian/pool/main/v/vulkan-loader/libvulkan-dev_1.4.309.0-1_amd64.deb}
TRIXIE_SHA256=8d329d465e16168afff58b1bd0dd6db46aac2cc3f56054a481b25a04e90b345a
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/ember
PYTHON=${EMBER_PYTHON:-.venv/bin/python}
GLSLC=${EMBER_GLSLC:-glslc}
JOBS=${EMBER_VULKAN_JOBS:-2}

say() { echo "vulkan-module.sh: $*"; }
advise() { # a missing prerequisite: one line, no module, never a failure
  echo "vulkan-module.sh: no Vulkan module built: $* (Ember runs on the CPU; README, \"Using a GPU\")" >&2
  exit 0
}
fail() {
  echo "vulkan-module.sh: $*" >&2
  exit 1
}

check=0 force=0
for arg in "$@"; do
  case "$arg" in
  --check) check=1 ;;
  --force) force=1 ;;
  -h | --help)
    sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *) fail "unknown option $arg" ;;
  esac
done

# "1.3.239" from an include folder's vulkan/vulkan_core.h, or nothing.
header_version() {
  local core=$1/vulkan/vulkan_core.h patch api parts
  [[ -f "$core" ]] || return 0
  patch=$(sed -n 's/^#define VK_HEADER_VERSION \([0-9][0-9]*\).*/\1/p' "$core")
  # VK_MAKE_API_VERSION(0, 1, 3, VK_HEADER_VERSION), or VK_MAKE_VERSION(1, 2, ...) before 1.2.175
  api=$(sed -n 's/^#define VK_HEADER_VERSION_COMPLETE VK_MAKE[A-Z_]*(\(.*\), *VK_HEADER_VERSION).*/\1/p' "$core")
  IFS=, read -ra parts <<<"${api// /}"
  ((${#parts[@]} >= 2)) && [[ -n "$patch" ]] || return 0
  echo "${parts[-2]}.${parts[-1]}.$patch"
}

at_least() { # at_least 1.3.239 1.3.272: is the first version >= the second?
  [[ "$(printf '%s\n%s\n' "$1" "$2" | sort -t. -k1,1n -k2,2n -k3,3n | head -n1)" == "$2" ]]
}

if ((!check)); then
  # --- the environment's llama-cpp-python ------------------------------------------------------
  [[ -x "$PYTHON" ]] || fail "no Python environment at $PYTHON: run \`uv sync\` first (or set EMBER_PYTHON)"
  lib="" version=""
  read -r lib version < <("$PYTHON" - <<'EOF' || true
import importlib.metadata as m, importlib.util, os
spec = importlib.util.find_spec("llama_cpp")  # the folder, without loading its libraries
if spec and spec.submodule_search_locations:
    print(os.path.join(next(iter(spec.submodule_search_locations)), "lib"), m.version("llama-cpp-python"))
EOF
  ) || true
  [[ -n "$lib" && -d "$lib" ]] || fail "llama-cpp-python is not installed in $PYTHON's environment: run \`uv sync\` first"
  target=$lib/libggml-vulkan.so
  # One this script built for another llama-cpp-python version (uv upgraded it and kept the extra
  # file) is replaced; one from elsewhere (a Vulkan build of llama-cpp-python) is kept.
  ours="" stale=""
  for built in "$CACHE"/vulkan-module/*/libggml-vulkan.so; do
    [[ -f "$built" && -e "$target" ]] && cmp -s "$built" "$target" || continue
    [[ "$built" == "$CACHE/vulkan-module/$version-"* ]] && ours=1 || stale=1
  done
  if [[ -e "$target" ]] && ((!force)) && [[ -z "$stale" ]]; then
    if [[ -n "$ours" ]]; then
      say "llama_cpp/lib already has the Vulkan module built by this script"
    else
      say "llama_cpp/lib already has a libggml-vulkan.so (a Vulkan build of llama-cpp-python?): left as is; --force replaces it"
    fi
    exit 0
  fi
fi

# --- prerequisites ---------------------------------------------------------------------------
[[ "$(uname -s)" == Linux ]] || advise "this script builds the Linux module only (macOS uses Metal; Windows: README)"
command -v "$GLSLC" >/dev/null 2>&1 || advise "glslc is missing (Debian/Ubuntu: apt-get install glslc)"
command -v cmake >/dev/null 2>&1 || advise "cmake is missing (apt-get install cmake)"
command -v c++ >/dev/null 2>&1 || advise "a C++ compiler is missing (apt-get install g++)"
spirv=$(compgen -G "/usr/share/cmake*/SPIRV-Headers/SPIRV-HeadersConfig.cmake" ||
  compgen -G "/usr/lib*/cmake/SPIRV-Headers/SPIRV-HeadersConfig.cmake" ||
  compgen -G "/usr/lib/*/cmake/SPIRV-Headers/SPIRV-HeadersConfig.cmake" ||
  compgen -G "/usr/local/*/cmake*/SPIRV-Headers/SPIRV-HeadersConfig.cmake" ||
  compgen -G "${VULKAN_SDK:-/nonexistent}/*/cmake/SPIRV-Headers/SPIRV-HeadersConfig.cmake" || true)
[[ -n "$spirv" ]] || advise "the SPIR-V headers are missing (Debian/Ubuntu: apt-get install spirv-headers)"
# The loader for this machine's word size (ldconfig -p: "libvulkan.so.1 (libc6,x86-64) => /lib/...").
arch=$([[ "$(uname -m)" == x86_64 ]] && echo x86-64 || echo "$(uname -m)")
loader=$({ ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null || true; } |
  sed -n "s/^[[:space:]]*libvulkan\.so\.1 (libc6,\{0,1\}[^)]*$arch[^)]*) => //Ip" | sed -n 1p)
[[ -n "$loader" ]] || loader=$(compgen -G "${VULKAN_SDK:-/nonexistent}/lib/libvulkan.so.1" || true)
[[ -n "$loader" ]] || advise "no Vulkan loader (libvulkan.so.1; Debian/Ubuntu: apt-get install libvulkan1)"

include=${EMBER_VULKAN_INCLUDE:-${VULKAN_SDK:+$VULKAN_SDK/include}}
include=${include:-/usr/include}
headers=$(header_version "$include")
trixie_include=$CACHE/vulkan-headers/$TRIXIE_VERSION/usr/include
if [[ -z "$headers" ]] || ! at_least "$headers" "$MIN_HEADERS"; then
  command -v dpkg-deb >/dev/null 2>&1 ||
    advise "the Vulkan headers in $include are ${headers:-missing}; ggml-vulkan needs $MIN_HEADERS or newer (the LunarG SDK, or your distribution's newer vulkan-headers; then set EMBER_VULKAN_INCLUDE)"
  if ((check)) && [[ ! -f "$trixie_include/vulkan/vulkan_core.h" ]]; then
    say "can build: glslc, SPIR-V headers and loader found; the Vulkan headers in $include are ${headers:-missing} (< $MIN_HEADERS), so Debian 13's $TRIXIE_VERSION headers will be downloaded for the compile"
    exit 0
  fi
  if [[ ! -f "$trixie_include/vulkan/vulkan_core.h" ]]; then
    mkdir -p "$CACHE/vulkan-headers"
    deb=$CACHE/vulkan-headers/libvulkan-dev_$TRIXIE_VERSION.deb
    curl -fsSL --max-time 300 -o "$deb.part" "$TRIXIE_DEB" ||
      advise "the Vulkan headers here are ${headers:-missing} (< $MIN_HEADERS) and Debian 13's could not be downloaded ($TRIXIE_DEB)"
    echo "$TRIXIE_SHA256  $deb.part" | sha256sum -c --quiet - >/dev/null 2>&1 ||
      advise "Debian 13's libvulkan-dev download does not match its checksum ($TRIXIE_DEB)"
    rm -rf "$CACHE/vulkan-headers/$TRIXIE_VERSION"
    mkdir -p "$CACHE/vulkan-headers/$TRIXIE_VERSION"
    dpkg-deb --fsys-tarfile "$deb.part" | tar -x -C "$CACHE/vulkan-headers/$TRIXIE_VERSION" ./usr/include
    rm -f "$deb.part"
  fi
  say "the system's Vulkan headers are ${headers:-missing} (< $MIN_HEADERS): compiling with Debian 13's libvulkan-dev $TRIXIE_VERSION headers ($trixie_include), linking the system's loader"
  include=$trixie_include
  headers=$(header_version "$include")
fi
glslc_version=$("$GLSLC" --version 2>/dev/null | sed -n '1s/^[^ ]* v\{0,1\}\([^ ]*\).*/\1/p')
key=$(tr -c 'A-Za-z0-9.+\n-' _ <<<"${version:-}-vk$headers-glslc${glslc_version:-unknown}")
cached=$CACHE/vulkan-module/$key/libggml-vulkan.so
if ((check)); then
  say "can build: glslc ${glslc_version:-?}, Vulkan headers $headers ($include), $spirv, loader $loader"
  exit 0
fi

# --- build (once per KEY) --------------------------------------------------------------------
if [[ ! -f "$cached" ]]; then
  # The sdist uv built the wheel from; else the same sdist from PyPI (checked against its sha256).
  src=""
  for dir in "$(uv cache dir 2>/dev/null || echo /nonexistent)"/sdists-v*/pypi/llama-cpp-python/"$version"/*/src/vendor/llama.cpp; do
    [[ -f "$dir/ggml/src/ggml-vulkan/CMakeLists.txt" ]] && src=$dir && break
  done
  if [[ -z "$src" ]]; then
    src=$(compgen -G "$CACHE/vulkan-module/src/*-$version/vendor/llama.cpp" | sed -n 1p || true)
    if [[ ! -f "$src/ggml/src/ggml-vulkan/CMakeLists.txt" ]]; then
      say "fetching llama-cpp-python $version's source from PyPI"
      "$PYTHON" - "$version" "$CACHE/vulkan-module/src" <<'EOF' || advise "could not download llama-cpp-python $version's source from PyPI"
import hashlib, json, os, sys, tarfile, urllib.request
version, dest = sys.argv[1], sys.argv[2]
# PyPI's simple index as JSON (PEP 691): every file of the project with its sha256
index = urllib.request.Request(
    "https://pypi.org/simple/llama-cpp-python/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
)
files = json.load(urllib.request.urlopen(index, timeout=60))["files"]
sdist = next(f for f in files if f["filename"] == f"llama_cpp_python-{version}.tar.gz")
data = urllib.request.urlopen(sdist["url"], timeout=600).read()
if hashlib.sha256(data).hexdigest() != sdist["hashes"]["sha256"]:
    sys.exit("checksum mismatch")
os.makedirs(dest, exist_ok=True)
path = os.path.join(dest, sdist["filename"])
with open(path, "wb") as f:
    f.write(data)
with tarfile.open(path) as tar:
    tar.extractall(dest, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(dest)
os.remove(path)
EOF
      src=$(compgen -G "$CACHE/vulkan-module/src/*-$version/vendor/llama.cpp" | sed -n 1p || true)
      [[ -f "$src/ggml/src/ggml-vulkan/CMakeLists.txt" ]] || fail "llama-cpp-python $version's sdist has no vendor/llama.cpp"
    fi
  fi
  # The module must match the installed libggml-base (ggml's version in both).
  want=$(sed -n 's/^set(GGML_VERSION_\(MAJOR\|MINOR\|PATCH\) *\([0-9]*\))/\2/p' "$src/ggml/CMakeLists.txt" | paste -sd.)
  [[ -f "$lib/libggml-base.so.$want" ]] ||
    fail "the source's ggml is $want but llama_cpp/lib has $(cd "$lib" && ls libggml-base.so.*.* 2>/dev/null): not building a module that would not load"
  build=$CACHE/vulkan-module/build-$key
  log=$CACHE/vulkan-module/build-$key.log
  mkdir -p "$CACHE/vulkan-module" # the source may come from uv's cache: nothing made this folder yet
  say "building libggml-vulkan.so for llama-cpp-python $version (ggml $want) with $JOBS jobs: about 15 minutes on two cores; log: $log"
  start=$(date +%s)
  {
    cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release \
      -DGGML_BACKEND_DL=ON -DGGML_VULKAN=ON -DGGML_CPU=OFF -DGGML_NATIVE=OFF -DGGML_CCACHE=OFF \
      -DBUILD_SHARED_LIBS=ON -DCMAKE_SKIP_BUILD_RPATH=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_COMMON=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
      -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
      -DVulkan_INCLUDE_DIR="$include" -DVulkan_LIBRARY="$loader" &&
      nice -n 19 cmake --build "$build" --target ggml-vulkan -j "$JOBS"
  } >"$log" 2>&1 || {
    tail -n 5 "$log" >&2
    fail "the build failed after $(($(date +%s) - start)) s (the whole log: $log)"
  }
  built=$(find "$build" -name libggml-vulkan.so -type f | sed -n 1p)
  [[ -n "$built" ]] || fail "the build finished but made no libggml-vulkan.so (log: $log)"
  mkdir -p "${cached%/*}"
  cp "$built" "$cached.part" && mv -f "$cached.part" "$cached"
  rm -rf "$build" # the module is cached; the objects would only take disk
  say "built in $(($(date +%s) - start)) s ($(du -h "$cached" | cut -f1)); cached in ${cached%/*}"
fi

# A new file renamed into place: never written through an existing (possibly hard-linked) one.
cp "$cached" "$lib/.libggml-vulkan.so.$$"
mv -f "$lib/.libggml-vulkan.so.$$" "$target"
say "installed $target; \`ember doctor\` lists its devices"
