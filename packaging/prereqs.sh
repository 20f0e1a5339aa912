#!/usr/bin/env bash
# Check what building and smoke-checking the frozen app needs; one line naming what is missing.
#
#   bash packaging/prereqs.sh        exit 0 when all is there, else 1 with one line on stderr
#
# Needed (Linux): uv; the xcb helper libraries the build bundles for Qt's xcb plugin; Xvfb,
# xdotool and ImageMagick's `import` for the window check; timeout and ldd.
set -uo pipefail

missing=() packages=()
need() {  # need NAME PACKAGE: a command
  command -v "$1" >/dev/null 2>&1 || { missing+=("$1"); packages+=("$2"); }
}
need uv "uv (https://docs.astral.sh/uv/)"
need timeout coreutils
if [[ "$(uname -s)" == Linux ]]; then
  need ldd libc-bin
  need Xvfb xvfb
  need xdotool xdotool
  need import imagemagick
  # Read the loader's cache once: `ldconfig -p | grep -q` under pipefail fails at random, because
  # grep quits at its match and ldconfig, still writing, dies of SIGPIPE (12 times in 300 under load).
  cache=$(ldconfig -p 2>/dev/null || true)
  for lib in libxcb-cursor.so.0:libxcb-cursor0 libxcb-icccm.so.4:libxcb-icccm4 libxcb-keysyms.so.1:libxcb-keysyms1 \
             libxcb-image.so.0:libxcb-image0 libxcb-render-util.so.0:libxcb-render-util0 \
             libxcb-util.so.1:libxcb-util1 libxkbcommon-x11.so.0:libxkbcommon-x11-0; do
    grep -qF "${lib%%:*} " <<<"$cache" || { missing+=("${lib%%:*}"); packages+=("${lib#*:}"); }
  done
fi
# A library whose versioned file is there but whose loader link is not: ldconfig was never run.
for name in "${missing[@]}"; do
  for versioned in /usr/lib/*-linux-gnu/"$name".* /lib/*-linux-gnu/"$name".*; do
    [[ -e "$versioned" ]] || continue
    echo "prereqs.sh: $versioned is installed but the loader cannot find $name: run ldconfig as root" >&2
    exit 1
  done
done
# The Vulkan module (libggml-vulkan.so) beside the CPU variants: packaging/vulkan-module.sh builds it
# after `uv sync` and says itself what it lacks; here only one line of advice, never a failure.
llama_lib="$(dirname "$0")/../.venv/lib/python3*/site-packages/llama_cpp/lib"
if [[ "$(uname -s)" == Linux ]] && compgen -G "$llama_lib/libggml-cpu-*.so" >/dev/null \
   && ! compgen -G "$llama_lib/libggml-vulkan.so" >/dev/null; then
  echo "prereqs.sh: the environment's llama.cpp has no Vulkan module, so the app will run on the CPU only:" \
       "run \`bash packaging/vulkan-module.sh\` first (it needs glslc and spirv-headers)" >&2
fi
if ((${#missing[@]})); then
  echo "prereqs.sh: the frozen-app build and smoke check need ${missing[*]}; on Debian/Ubuntu: apt-get install ${packages[*]}" >&2
  exit 1
fi
