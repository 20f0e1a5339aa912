#!/usr/bin/env bash
# Smoke-check a built Ember folder the way a new user gets it: copied elsewhere, started with
# a minimal environment (no virtual environment, no uv, HOME only), without network.
#
#   bash packaging/smoke.sh [DIST_FOLDER]      (default: dist/ember)
#
# Each check has a time limit. On a copy of the folder in a temporary directory:
#   --version (its cold start is measured), --help (lists every command), the licence texts
#   (LICENSE, THIRD-PARTY/), every module of
#   Ember imports in the frozen app (and the MCP SDK, llama.cpp, Qt), a child process runs one of
#   Ember's functions (as the CPU probe and the grammar checker do), `chat --events` on the
#   built-in model ends with a done event, `doctor`, `tools` (an MCP server is started through
#   the SDK), `history list` (shows the chat), `models --json`, `docs add` and `docs search` on
#   a small text file with the default embedder (converted at first use), `doctor --network --json`
#   (zero-egress on, no connection made by any of the above), every bundled library resolves
#   (ldd, Linux), the xcb plugin's helpers are bundled, and the window on a real X server
#   (Xvfb, xcb): first paint (measured), then quit on SIGTERM with exit status 0.
# The report ends with the folder size and the start times; EMBER_SMOKE_REPORT=FILE also
# writes it there. Network isolation uses `unshare -rn` where the kernel allows it. Exit
# status 0 when every check passed. EMBER_SMOKE_KEEP=1 keeps the temporary directory.
set -uo pipefail

cd "$(dirname "$0")/.."
SRC=${1:-dist/ember}
NAME=$(basename "$SRC")
if [[ ! -d "$SRC" ]]; then
  echo "smoke.sh: $SRC not found; build it first: bash packaging/build.sh" >&2
  exit 2
fi
TIMEOUT=$(command -v timeout || command -v gtimeout || true)
if [[ -z "$TIMEOUT" ]]; then
  echo "smoke.sh: the timeout command is needed (coreutils; on macOS: brew install coreutils)" >&2
  exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ember-smoke.XXXXXX")
xvfb_pid=""
cleanup() {
  [[ -n "$xvfb_pid" ]] && kill "$xvfb_pid" 2>/dev/null
  [[ "${EMBER_SMOKE_KEEP:-0}" == 1 ]] || rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/elsewhere" "$tmp/home"
cp -a "$SRC" "$tmp/elsewhere/"
APP="$tmp/elsewhere/$NAME"
EXE="$APP/$NAME"
[[ -x "$EXE" ]] || EXE="$APP/ember"
SIZE=$(du -sh "$APP" | cut -f1)
SIZE_MB=$(( $(du -sk "$APP" | cut -f1) / 1024 ))

# No network: a new user on a plane. `unshare -rn` needs unprivileged user namespaces.
NONET=()
if unshare -rn true 2>/dev/null; then
  NONET=(unshare -rn)
  net="no network (unshare -rn)"
else
  net="network NOT isolated (unshare -rn unavailable here)"
fi

failures=0
report=()
pass() { echo "PASS  $*"; }
fail() { echo "FAIL  $*"; failures=$((failures + 1)); }
warn() { echo "WARN  $*"; }
ms_now() { date +%s%3N; }

run() {  # run LIMIT_S ARGS...: the copied app, minimal environment, a time limit
  local limit=$1; shift
  (cd "$tmp" && "${NONET[@]}" env -i HOME="$tmp/home" PATH=/usr/bin:/bin QT_QPA_PLATFORM=offscreen \
    "$TIMEOUT" "$limit" "$EXE" "$@")
}

echo "smoke.sh: $SIZE folder copied to $APP; $net; env: HOME only"

# --version, cold: the first start of the copied folder
t0=$(ms_now); out=$(run 60 --version 2>&1); rc=$?; cold_ms=$(( $(ms_now) - t0 ))
t0=$(ms_now); run 60 --version >/dev/null 2>&1; warm_ms=$(( $(ms_now) - t0 ))
if [[ $rc -eq 0 && "$out" =~ ^ember\ [0-9] ]]; then
  pass "--version: $out (cold ${cold_ms} ms, again ${warm_ms} ms)"
else
  fail "--version (exit $rc): $out"
fi

# --help lists every command
help=$(run 60 --help 2>&1); rc=$?
missing=""
for cmd in chat models history bench tools docs doctor serve network; do
  grep -qE "^\s+$cmd\b" <<<"$help" || missing+=" $cmd"
done
if [[ $rc -eq 0 && -z "$missing" ]]; then pass "--help lists every command"; else fail "--help (exit $rc) lacks:$missing"; fi

# the licences travel with the app: Ember's, and each third-party distribution's (Qt's LGPLv3)
third="$APP/_internal/THIRD-PARTY"
if [[ -f "$APP/_internal/LICENSE" && -f "$third/README.txt" ]] && compgen -G "$third/pyside6-essentials-*/LGPL-3.0.txt" >/dev/null \
  && compgen -G "$third/llama-cpp-python-*/*" >/dev/null; then
  pass "licences: LICENSE and THIRD-PARTY/ ($(find "$third" -mindepth 1 -maxdepth 1 -type d | wc -l) distributions)"
else
  fail "licences: LICENSE or THIRD-PARTY/ (README.txt, PySide6's LGPL-3.0.txt, llama-cpp-python's) missing in $APP/_internal"
fi

# every module of Ember imports in the frozen app, and the libraries its paths load
read -r -d '' IMPORTS <<'PY'
import importlib, pkgutil, sys
import desktop, engine, models
bad, n = [], 0
names = [m.name for p in (desktop, engine, models) for m in pkgutil.walk_packages(p.__path__, p.__name__ + ".")]
names += ["mcp", "mcp.client.stdio", "llama_cpp", "PySide6.QtWidgets", "qasync", "qtawesome",
          "pypdfium2", "docx", "ziamath",  # loaded lazily by documents and math: load them here
          "huggingface_hub.hf_api", "huggingface_hub.utils", "regex",  # the Hub's lazy attributes; schema patterns
          "gguf"]  # the default embedder's converter (imported at its first use)
for name in names:
    if name.endswith(".__main__"):
        continue
    try:
        importlib.import_module(name)
        n += 1
    except Exception as exc:
        bad.append(f"{name}: {type(exc).__name__}: {exc}")
try:  # the shipped model catalogue is a data file: it must be in the app
    from models.library.catalogue import shipped_catalogue
    n_catalogue = len(shipped_catalogue())
except Exception as exc:
    bad.append(f"catalogue: {type(exc).__name__}: {exc}")
print(f"imported {n} modules; catalogue of {n_catalogue} models" if not bad else "\n".join(bad))
sys.exit(1 if bad or n < 100 else 0)
PY
out=$(run 120 -c "$IMPORTS" 2>&1); rc=$?
if [[ $rc -eq 0 ]]; then pass "imports: $out (every module of desktop, engine, models; MCP SDK, llama.cpp, Qt)"; else fail "imports (exit $rc): $(tail -c 2000 <<<"$out")"; fi

# a child process runs one of Ember's functions (the CPU probe, the grammar checker, the stop
# watchdog; engine/child_env.py): the frozen app answers `-I -c` for it. Modules planted in the
# current folder must never run, in the app or in its children.
mkdir -p "$tmp/engine"
for planted in struct.py json.py engine/__init__.py; do
  printf 'open("%s", "a").write("%s ran\\n")\n' "$tmp/PLANTED" "$planted" > "$tmp/$planted"
done
read -r -d '' FUNCTION_CHILD <<'PY'
import subprocess, sys
from engine.llama.cpu import SCORE_CHILD
from engine.child_env import function_child
child = function_child(SCORE_CHILD)  # no variant files named: llama.cpp loads, nothing is scored
done = subprocess.run(child.argv, env=child.env, cwd=child.cwd, capture_output=True, text=True, timeout=60)
print(f"a function child exited with {done.returncode}")
sys.exit(done.returncode)
PY
out=$(run 90 -c "$FUNCTION_CHILD" 2>&1); rc=$?
if [[ $rc -eq 0 ]]; then pass "child process: $out"; else fail "child process (exit $rc): $(tail -c 1500 <<<"$out")"; fi
if [[ -e "$tmp/PLANTED" ]]; then fail "modules in the current folder ran: $(cat "$tmp/PLANTED")"; else pass "no module planted in the current folder ran"; fi
rm -rf "$tmp/engine" "$tmp/struct.py" "$tmp/json.py"

# chat on the built-in model
t0=$(ms_now)
out=$(run 180 chat --events --max-tokens 8 --temperature 0 "Hi" 2>"$tmp/chat.err"); rc=$?
secs=$(( ($(ms_now) - t0) / 1000 ))
done_line=$(grep -E '"type": ?"done"' <<<"$out" | tail -1)
if [[ $rc -eq 0 && -n "$done_line" ]]; then
  text=$(grep -E '"type": ?"content"' <<<"$out" | sed -E 's/.*"text": ?"(([^"\\]|\\.)*)".*/\1/' | tr -d '\n')
  pass "chat --events --max-tokens 8 \"Hi\" (${secs}s): reply \"${text}\""
else
  fail "chat (exit $rc): $(tail -c 1500 <<<"$out") $(tail -c 1500 "$tmp/chat.err")"
fi

# doctor
out=$(run 60 doctor 2>&1); rc=$?
if [[ $rc -eq 0 ]] && grep -q "llama-cpp-python" <<<"$out"; then pass "doctor"; else fail "doctor (exit $rc): $(tail -c 1500 <<<"$out")"; fi

# tools: the MCP SDK starts a (trivial) server over stdio
mkdir -p "$tmp/home/.config/ember"
printf '{"mcpServers": {"probe": {"command": "/bin/true"}}}\n' >"$tmp/home/.config/ember/mcp.json"
out=$(run 60 tools --mcp probe 2>&1); rc=$?
if [[ $rc -eq 0 ]] && grep -q "^builtin:" <<<"$out" && grep -q "MCP server probe" <<<"$out" \
   && ! grep -qE "ModuleNotFoundError|ImportError|Traceback" <<<"$out"; then
  pass "tools --mcp probe: built-in tools listed, the MCP SDK started the server ($(grep -m1 'MCP server probe' <<<"$out" | cut -c1-90))"
else
  fail "tools (exit $rc): $(tail -c 1500 <<<"$out")"
fi

# history list: the chat above was recorded
out=$(run 60 history list 2>&1); rc=$?
if [[ $rc -eq 0 ]] && grep -qE '^\s+1\s' <<<"$out"; then pass "history list: $(head -1 <<<"$out" | tr -s ' ')"; else fail "history list (exit $rc): $(tail -c 800 <<<"$out")"; fi

# models
out=$(run 60 models --json 2>"$tmp/models.err"); rc=$?
if [[ $rc -eq 0 ]] && grep -q "SmolLM2-135M-Instruct.Q4_1.gguf" <<<"$out"; then
  pass "models --json lists the bundled SmolLM2-135M-Instruct.Q4_1.gguf"
else
  fail "models --json (exit $rc): $(head -c 800 <<<"$out") $(tail -c 1500 "$tmp/models.err")"
fi

# documents with the default embedder: all-MiniLM-L6-v2 is converted at first use from the bundled
# model.zip (gguf, numpy), a collection of one small text file is embedded, and a search finds it
printf '# Garden notes\n\nThe tomato seedlings go out after the last frost in May.\n' >"$tmp/garden.md"
t0=$(ms_now)
out=$(run 300 docs add Garden "$tmp/garden.md" 2>&1); rc=$?
secs=$(( ($(ms_now) - t0) / 1000 ))
listed=$(run 60 docs list --json 2>&1)
found=$(run 120 docs search Garden "When do the tomato seedlings go out?" --json 2>&1); rc_search=$?
if [[ $rc -eq 0 && $rc_search -eq 0 ]] && grep -q '"embedder": "default"' <<<"$listed" \
   && grep -qE '"vectors": [1-9]' <<<"$listed" && grep -q 'garden\.md' <<<"$found"; then
  pass "docs add with the default embedder (${secs}s, converted at first use): $out; docs search finds the passage"
else
  fail "docs with the default embedder (add exit $rc, search exit $rc_search): $(tail -c 800 <<<"$out") $(tail -c 600 <<<"$listed") $(tail -c 800 <<<"$found")"
fi

# zero-egress: on for a fresh install, and nothing above connected anywhere
out=$(run 60 doctor --network --json 2>&1); rc=$?
if [[ $rc -eq 0 ]] && grep -q '"zero_egress": true' <<<"$out" && grep -q '"totals": {"allowed": 0' <<<"$out"; then
  pass "doctor --network: zero-egress on, 0 connections allowed by the checks above"
else
  fail "doctor --network (exit $rc): $(head -c 1500 <<<"$out")"
fi

# bundled libraries resolve (Linux); system-provided libraries are reported, not failed
if [[ "$(uname -s)" == Linux ]] && command -v ldd >/dev/null; then
  missing=$(find "$APP" -type f \( -name '*.so' -o -name '*.so.*' \) -print0 \
    | xargs -0 -n 20 env -i LD_LIBRARY_PATH="$APP/_internal" ldd 2>/dev/null \
    | awk '/^\//{f=$1} /not found/{print $1}' | sort -u | tr '\n' ' ')
  if [[ -z "$missing" ]]; then
    pass "ldd: every bundled library resolves"
  else
    warn "ldd: system libraries missing on this machine (Qt's xcb, Wayland or GTK plugins load them on a desktop): $missing"
  fi
  qxcb=$(find "$APP" -name libqxcb.so | head -1)
  if [[ -z "$qxcb" ]]; then
    fail "xcb: the folder has no libqxcb.so"
  else
    outside=$(env -i LD_LIBRARY_PATH="$APP/_internal" ldd "$qxcb" | grep -E 'lib(xcb-(cursor|icccm|keysyms|image|render-util|util)|xkbcommon-x11)\.so' \
      | grep -v -- "$APP" | awk '{print $1 " -> " $3}' | tr '\n' ' ')
    if [[ -z "$outside" ]]; then pass "xcb: the plugin's xcb-util libraries resolve inside the folder"
    else fail "xcb: the plugin loads these from outside the folder (not bundled): $outside"; fi
  fi
fi

# the window on a real X server (Xvfb, xcb): first paint, then quit on SIGTERM
paint_ms=""
if [[ "$(uname -s)" == Linux ]]; then
  for tool in Xvfb xdotool import; do
    command -v "$tool" >/dev/null || { fail "window: $tool is missing (apt-get install xvfb xdotool imagemagick)"; tool=""; break; }
  done
  if [[ -n "${tool:-}" ]]; then
    disp=:$(( 90 + RANDOM % 100 ))
    Xvfb "$disp" -screen 0 1280x800x24 -nolisten tcp >"$tmp/xvfb.out" 2>&1 &
    xvfb_pid=$!
    for _ in $(seq 50); do xdotool getdisplaygeometry --display "$disp" >/dev/null 2>&1 && break; sleep 0.1; done
    t0=$(ms_now)
    (cd "$tmp" && exec "${NONET[@]}" env -i HOME="$tmp/home" PATH=/usr/bin:/bin DISPLAY="$disp" QT_QPA_PLATFORM=xcb \
      "$TIMEOUT" 90 "$EXE" >"$tmp/gui-x.out" 2>&1) &
    gui_pid=$!
    # First paint: Ember's window is mapped and shows more than a blank fill.
    deadline=$(( t0 + 60000 ))
    while (( $(ms_now) < deadline )) && kill -0 "$gui_pid" 2>/dev/null; do
      wid=$(DISPLAY=$disp xdotool search --onlyvisible --name '^Ember' 2>/dev/null | head -1)
      if [[ -n "$wid" ]]; then
        colours=$(DISPLAY=$disp import -window "$wid" -format '%k' info: 2>/dev/null || echo 0)
        if (( colours > 8 )); then paint_ms=$(( $(ms_now) - t0 )); break; fi
      fi
      sleep 0.05
    done
    if [[ -n "$paint_ms" ]]; then
      DISPLAY=$disp import -window "$wid" "$tmp/window.png" 2>/dev/null && [[ -n "${EMBER_SMOKE_SHOT:-}" ]] && cp "$tmp/window.png" "$EMBER_SMOKE_SHOT"
      # $gui_pid is `timeout` (the rest exec'd): it forwards SIGTERM to Ember, which closes and exits 0.
      kill -TERM "$gui_pid"
      for _ in $(seq 150); do kill -0 "$gui_pid" 2>/dev/null || break; sleep 0.1; done
      wait "$gui_pid"; rc=$?
      if [[ $rc -eq 0 ]]; then
        pass "window on X: first paint after ${paint_ms} ms on Xvfb ($disp, xcb), quit on SIGTERM with status 0"
      else
        fail "window on X: painted after ${paint_ms} ms, but quitting ended with status $rc: $(tail -c 1500 "$tmp/gui-x.out")"
      fi
    else
      kill "$gui_pid" 2>/dev/null; wait "$gui_pid" 2>/dev/null
      fail "window on X: no painted Ember window within 60 s: $(tail -c 1500 "$tmp/gui-x.out")"
    fi
    kill "$xvfb_pid" 2>/dev/null; wait "$xvfb_pid" 2>/dev/null; xvfb_pid=""
  fi
fi

report=(
  "folder: $SIZE (${SIZE_MB} MiB, du)"
  "cold start: --version ${cold_ms} ms (again: ${warm_ms} ms); window first paint ${paint_ms:-n/a} ms"
  "load: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime) on $(nproc 2>/dev/null || echo '?') cores"
)
printf 'smoke.sh: %s\n' "${report[@]}"
if [[ -n "${EMBER_SMOKE_REPORT:-}" ]]; then printf '%s\n' "${report[@]}" >"$EMBER_SMOKE_REPORT"; fi

if (( failures )); then
  echo "smoke.sh: $failures check(s) FAILED"
  exit 1
fi
echo "smoke.sh: all checks passed"
