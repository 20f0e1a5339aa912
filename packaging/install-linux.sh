#!/usr/bin/env bash
# Add the built Ember app to the Linux desktop's application menu: the desktop entry, the
# AppStream metainfo and the icons, for the current user (no root needed).
#
#   bash packaging/install-linux.sh [options]
#
#   --app DIR      the built app folder (default: dist/ember); the menu entry starts DIR/ember
#   --copy         first copy the app folder to PREFIX/lib/ember and use that copy, so the
#                  source folder (and the repository) can be deleted
#   --bin          also link PREFIX/bin/ember to the app, for the `ember` command in a terminal
#   --prefix DIR   install under DIR (default: $PREFIX, else ~/.local); files go to
#                  DIR/share/{applications,metainfo,icons/hicolor}
#   --uninstall    remove what an install with the same --prefix put there
#
# Build the app first: bash packaging/build.sh. See docs/packaging.md.
set -euo pipefail

cd "$(dirname "$0")/.."
HERE=$(pwd)
APP_ID=io.github.ember.Ember
PREFIX=${PREFIX:-$HOME/.local}
APP=dist/ember
copy=0 bin=0 uninstall=0

while (($#)); do
  case "$1" in
    --app) APP=$2; shift ;;
    --app=*) APP=${1#*=} ;;
    --prefix) PREFIX=$2; shift ;;
    --prefix=*) PREFIX=${1#*=} ;;
    --copy) copy=1 ;;
    --bin) bin=1 ;;
    --uninstall) uninstall=1 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-linux.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

SHARE=$PREFIX/share
DESKTOP=$SHARE/applications/$APP_ID.desktop
METAINFO=$SHARE/metainfo/$APP_ID.metainfo.xml
ICONS=$SHARE/icons/hicolor
SIZES=(16 32 48 64 128 256 512)

refresh() {  # let menus and icon caches notice; all optional
  command -v update-desktop-database >/dev/null && update-desktop-database -q "$SHARE/applications" 2>/dev/null || true
  command -v gtk-update-icon-cache >/dev/null && gtk-update-icon-cache -q -t -f "$ICONS" 2>/dev/null || true
}

if ((uninstall)); then
  rm -f "$DESKTOP" "$METAINFO" "$ICONS/scalable/apps/$APP_ID.svg"
  for n in "${SIZES[@]}"; do rm -f "$ICONS/${n}x${n}/apps/$APP_ID.png"; done
  if [[ -L "$PREFIX/bin/ember" && "$(readlink "$PREFIX/bin/ember")" == */ember ]]; then rm -f "$PREFIX/bin/ember"; fi
  if [[ -f "$PREFIX/lib/ember/ember" ]]; then rm -rf "$PREFIX/lib/ember"; fi
  refresh
  echo "install-linux.sh: removed Ember's menu entry, metainfo and icons from $SHARE"
  exit 0
fi

APP=$(cd "$APP" 2>/dev/null && pwd) || { echo "install-linux.sh: no app folder; run: bash packaging/build.sh" >&2; exit 1; }
if [[ ! -x "$APP/ember" ]]; then
  echo "install-linux.sh: $APP/ember not found; run: bash packaging/build.sh" >&2
  exit 1
fi
if ((copy)); then
  mkdir -p "$PREFIX/lib"
  rm -rf "$PREFIX/lib/ember.new"
  cp -a "$APP" "$PREFIX/lib/ember.new"
  rm -rf "$PREFIX/lib/ember"
  mv "$PREFIX/lib/ember.new" "$PREFIX/lib/ember"
  APP=$(cd "$PREFIX/lib/ember" && pwd)
fi
EXE=$APP/ember

# The desktop entry's Exec value is quoted; these characters would need escaping there.
case "$EXE" in
  *[\"\`\$\\]*) echo "install-linux.sh: the app path may not contain \" \` \$ or \\: $EXE" >&2; exit 1 ;;
esac

mkdir -p "$SHARE/applications" "$SHARE/metainfo" "$ICONS/scalable/apps"
sed -e "s|^Exec=.*|Exec=\"$EXE\"|" -e "s|^TryExec=.*|TryExec=$EXE|" -e '/^# packaging\/install-linux.sh/d' \
  packaging/linux/ember.desktop >"$DESKTOP.tmp"
mv "$DESKTOP.tmp" "$DESKTOP"
install -m 644 "packaging/linux/$APP_ID.metainfo.xml" "$METAINFO"
install -m 644 packaging/icons/ember.svg "$ICONS/scalable/apps/$APP_ID.svg"
for n in "${SIZES[@]}"; do
  install -D -m 644 "packaging/icons/hicolor/${n}x${n}/apps/ember.png" "$ICONS/${n}x${n}/apps/$APP_ID.png"
done
if ((bin)); then
  mkdir -p "$PREFIX/bin"
  ln -sfn "$EXE" "$PREFIX/bin/ember"
fi
refresh

echo "install-linux.sh: Ember is in the application menu (it may take a moment to appear)"
echo "  menu entry  $DESKTOP"
echo "  metainfo    $METAINFO"
echo "  icons       $ICONS/{16x16..512x512,scalable}/apps/$APP_ID.*"
echo "  starts      $EXE"
((bin)) && echo "  command     $PREFIX/bin/ember"
echo "Remove with: bash $HERE/packaging/install-linux.sh --uninstall${PREFIX:+ --prefix $PREFIX}"
