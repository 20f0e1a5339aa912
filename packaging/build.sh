#!/usr/bin/env bash
# Build Ember's self-contained one-folder app with PyInstaller: dist/ember/ember.
#
#   bash packaging/build.sh            build (incremental: PyInstaller's cache is build/pyinstaller)
#   bash packaging/build.sh --clean    build from scratch
#   bash packaging/build.sh --smoke    build, then run packaging/smoke.sh on the result
#
# Needs uv (https://docs.astral.sh/uv/); PyInstaller is fetched by uv into its cache and run
# next to the project's environment, never added to it. The build bundles whatever
# llama-cpp-python the project environment has, so a GPU build (docs/packaging.md) is
# bundled as is. Environment: EMBER_PYINSTALLER overrides the PyInstaller requirement;
# EMBER_APP_NAME the folder/executable name (default: ember); EMBER_BUILD_CACHE where
# PyInstaller keeps its work between builds (default: build/pyinstaller; CI points it at
# ~/.cache so a fresh clone rebuilds incrementally).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
NAME=${EMBER_APP_NAME:-ember}
PYINSTALLER_REQ=${EMBER_PYINSTALLER:-pyinstaller==6.22.3}
WORKPATH=${EMBER_BUILD_CACHE:-build/pyinstaller}

clean=() smoke=0
for arg in "$@"; do
  case "$arg" in
    --clean) clean=(--clean) ;;
    --smoke) smoke=1 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

if ! command -v uv >/dev/null 2>&1; then
  echo "build.sh: uv is needed (https://docs.astral.sh/uv/getting-started/installation/)" >&2
  exit 1
fi

# The spec imports nothing from Qt's GUI, but keep any accidental Qt start headless.
export QT_QPA_PLATFORM=${QT_QPA_PLATFORM:-offscreen}
export EMBER_APP_NAME=$NAME

start=$(date +%s)
echo "build.sh: building dist/$NAME with $PYINSTALLER_REQ (this takes a few minutes)"
uv run --with "$PYINSTALLER_REQ" pyinstaller packaging/ember.spec \
  --distpath dist --workpath "$WORKPATH" --noconfirm --log-level WARN "${clean[@]}"
elapsed=$(( $(date +%s) - start ))

case "$(uname -s)" in
  Darwin) out="dist/Ember.app"; exe="dist/Ember.app/Contents/MacOS/$NAME" ;;
  MINGW*|MSYS*|CYGWIN*) out="dist/$NAME"; exe="dist/$NAME/$NAME.exe" ;;
  *) out="dist/$NAME"; exe="dist/$NAME/$NAME" ;;
esac
if [[ ! -x "$exe" ]]; then
  echo "build.sh: expected $exe, not found" >&2
  exit 1
fi

size=$(du -sh "$out" | cut -f1)
echo "build.sh: built $ROOT/$out in ${elapsed}s, size $size"
echo "build.sh: executable $exe (same commands as 'ember': --version, chat, models, ...)"
echo "build.sh: check it with: bash packaging/smoke.sh"

if (( smoke )); then
  bash packaging/smoke.sh "$out"
fi
