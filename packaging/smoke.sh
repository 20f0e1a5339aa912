#!/usr/bin/env bash
# Smoke-check a built Ember folder the way a new user gets it: copied elsewhere, started with
# a minimal environment (no virtual environment, no uv, HOME only), without network.
#
#   bash packaging/smoke.sh [DIST_FOLDER]      (default: dist/ember)
#
# Checks, on a copy of the folder in a temporary directory:
#   1. `ember --version` prints the version;
#   2. `ember chat --events --max-tokens 8 "Hi"` on the bundled model ends with a done event;
#   3. `ember --help` lists `models`, and `ember models --json` describes the bundled model;
#   4. every bundled library resolves its bundled dependencies (ldd, Linux);
#   5. the window starts offscreen and stays up for a few seconds;
#   6. the bundled xcb plugin resolves its xcb-util libraries inside the folder (Linux);
#   7. the window starts on a real X server (Xvfb, xcb platform plugin) and stays up (Linux).
# Network isolation uses `unshare -rn` where the kernel allows it (else the check runs with
# the network and says so). Exit status 0 when every check passed. EMBER_SMOKE_KEEP=1 keeps
# the temporary directory.
set -uo pipefail

cd "$(dirname "$0")/.."
SRC=${1:-dist/ember}
NAME=$(basename "$SRC")
if [[ ! -d "$SRC" ]]; then
  echo "smoke.sh: $SRC not found; build it first: bash packaging/build.sh" >&2
  exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ember-smoke.XXXXXX")
if [[ "${EMBER_SMOKE_KEEP:-0}" != 1 ]]; then
  trap 'rm -rf "$tmp"' EXIT
fi
mkdir -p "$tmp/elsewhere" "$tmp/home"
cp -a "$SRC" "$tmp/elsewhere/"
APP="$tmp/elsewhere/$NAME"
EXE="$APP/$NAME"
[[ -x "$EXE" ]] || EXE="$APP/ember"

# No network: a new user on a plane. `unshare -rn` needs unprivileged user namespaces.
NONET=()
if unshare -rn true 2>/dev/null; then
  NONET=(unshare -rn)
  net="no network (unshare -rn)"
else
  net="network NOT isolated (unshare -rn unavailable here)"
fi

run() {  # run the copied app with a minimal environment
  (cd "$tmp" && "${NONET[@]}" env -i HOME="$tmp/home" PATH=/usr/bin:/bin QT_QPA_PLATFORM=offscreen "$EXE" "$@")
}

failures=0
pass() { echo "PASS  $*"; }
fail() { echo "FAIL  $*"; failures=$((failures + 1)); }
warn() { echo "WARN  $*"; }

echo "smoke.sh: $(du -sh "$SRC" | cut -f1) folder copied to $APP; $net; env: HOME only"

# 1. --version
out=$(run --version 2>&1); rc=$?
if [[ $rc -eq 0 && "$out" =~ ^ember\ [0-9] ]]; then pass "--version: $out"; else fail "--version (exit $rc): $out"; fi

# 2. chat on the bundled default model
start=$(date +%s)
out=$(run chat --events --max-tokens 8 --temperature 0 "Hi" 2>"$tmp/chat.err"); rc=$?
secs=$(( $(date +%s) - start ))
done_line=$(grep -E '"type": ?"done"' <<<"$out" | tail -1)
if [[ $rc -eq 0 && -n "$done_line" ]]; then
  text=$(grep -E '"type": ?"content"' <<<"$out" | sed -E 's/.*"text": ?"(([^"\\]|\\.)*)".*/\1/' | tr -d '\n')
  pass "chat --events --max-tokens 8 \"Hi\" (${secs}s): reply \"${text}\""
  echo "      $done_line"
else
  fail "chat (exit $rc): $(tail -c 1500 <<<"$out") $(tail -c 1500 "$tmp/chat.err")"
fi

# 3. models
help=$(run --help 2>&1)
if grep -qE '^\s+models\b' <<<"$help"; then
  out=$(run models --json 2>"$tmp/models.err"); rc=$?
  if [[ $rc -eq 0 ]] && grep -q "SmolLM2-135M-Instruct.Q4_1.gguf" <<<"$out"; then
    pass "models --json lists the bundled SmolLM2-135M-Instruct.Q4_1.gguf"
  elif grep -qiE "not implemented" <<<"$out$(cat "$tmp/models.err")"; then
    warn "models --json: not implemented yet"
  else
    fail "models --json (exit $rc): $(head -c 800 <<<"$out") $(tail -c 1500 "$tmp/models.err")"
  fi
else
  fail "--help does not list the models command"
fi

# 4. bundled libraries resolve (Linux); system-provided libraries are reported, not failed
if [[ "$(uname -s)" == Linux ]] && command -v ldd >/dev/null; then
  missing=$(find "$APP" -type f \( -name '*.so' -o -name '*.so.*' \) -print0 \
    | xargs -0 -n 20 env -i LD_LIBRARY_PATH="$APP/_internal" ldd 2>/dev/null \
    | awk '/^\//{f=$1} /not found/{print $1}' | sort -u | tr '\n' ' ')
  if [[ -z "$missing" ]]; then
    pass "ldd: every bundled library resolves"
  else
    warn "ldd: system libraries missing on this machine (Qt's xcb, Wayland or GTK plugins load them on a desktop): $missing"
  fi
fi

# 5. the window starts (offscreen) and keeps running
TIMEOUT=$(command -v timeout || command -v gtimeout || true)
if [[ -z "$TIMEOUT" ]]; then
  warn "window: not checked (no timeout command; on macOS: brew install coreutils)"
else
  (cd "$tmp" && "${NONET[@]}" env -i HOME="$tmp/home" PATH=/usr/bin:/bin QT_QPA_PLATFORM=offscreen \
    "$TIMEOUT" 10 "$EXE" >"$tmp/gui.out" 2>&1); rc=$?
  if [[ $rc -eq 124 ]]; then
    pass "window: started offscreen and ran until stopped after 10 s"
  elif grep -qE "ModuleNotFoundError|ImportError|platform plugin|cannot open shared object|Library not loaded" "$tmp/gui.out"; then
    fail "window (exit $rc), a packaging problem: $(tail -c 1500 "$tmp/gui.out")"
  else
    warn "window exited $rc within 10 s (the GUI may be unfinished): $(tail -c 600 "$tmp/gui.out")"
  fi
fi

# 6. the bundled xcb plugin finds the xcb helpers inside the folder (they are bundled)
if [[ "$(uname -s)" == Linux ]] && command -v ldd >/dev/null; then
  qxcb=$(find "$APP" -name libqxcb.so | head -1)
  if [[ -z "$qxcb" ]]; then
    fail "xcb: the folder has no libqxcb.so"
  else
    outside=$(env -i LD_LIBRARY_PATH="$APP/_internal" ldd "$qxcb" | grep -E 'lib(xcb-(cursor|icccm|keysyms|image|render-util|util)|xkbcommon-x11)\.so' \
      | grep -v -- "$APP" | awk '{print $1 " -> " $3}' | tr '\n' ' ')
    if [[ -z "$outside" ]]; then
      pass "xcb: the plugin's xcb-util libraries resolve inside the folder"
    else
      fail "xcb: the plugin loads these from outside the folder (not bundled): $outside"
    fi
  fi
fi

# 7. the window starts on a real X server (Xvfb, the xcb platform plugin)
XVFB=$(command -v Xvfb || true)
if [[ "$(uname -s)" != Linux ]]; then
  :
elif [[ -z "$XVFB" || -z "$TIMEOUT" ]]; then
  warn "window on X: not checked (no Xvfb; on Debian/Ubuntu: apt-get install xvfb)"
else
  disp=:$(( 90 + RANDOM % 100 ))
  "$XVFB" "$disp" -screen 0 1280x800x24 -nolisten tcp >"$tmp/xvfb.out" 2>&1 &
  xvfb_pid=$!
  sleep 1
  (cd "$tmp" && "${NONET[@]}" env -i HOME="$tmp/home" PATH=/usr/bin:/bin DISPLAY="$disp" QT_QPA_PLATFORM=xcb \
    "$TIMEOUT" 10 "$EXE" >"$tmp/gui-x.out" 2>&1); rc=$?
  kill "$xvfb_pid" 2>/dev/null; wait "$xvfb_pid" 2>/dev/null
  if [[ $rc -eq 124 ]]; then
    pass "window on X: started on Xvfb ($disp, xcb) and ran until stopped after 10 s"
  else
    fail "window on X (exit $rc): $(tail -c 1500 "$tmp/gui-x.out")"
  fi
fi

if (( failures )); then
  echo "smoke.sh: $failures check(s) FAILED"
  exit 1
fi
echo "smoke.sh: all checks passed"
