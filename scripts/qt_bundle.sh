#!/usr/bin/env bash
# Pack the Qt the app needs (QtCore/Gui/Widgets/OpenGL/Svg, the offscreen platform, pyqtgraph, the
# system libraries Qt links, three fonts) into .qt/qtbundle.tar.xz, ~28 MB: small enough to travel
# to a machine without PySide6 (the full wheel is 80 MB), e.g. a lent GPU machine.
#   scripts/qt_bundle.sh [PYTHON]        # PYTHON: the interpreter whose PySide6 to pack (default .venv/bin/python)
# There (the PySide6 modules are abi3, so any Python >= 3.10 on x86-64 Linux loads them):
#   mkdir -p /tmp/qtb && tar -C /tmp/qtb -xJf .qt/qtbundle.tar.xz
#   for f in /tmp/qtb/lib/*; do ldconfig -p | grep -q "$(basename $f) " && rm $f; done  # keep only what it lacks
#   printf '<fontconfig><dir>/tmp/qtb/fonts</dir><cachedir>/tmp/qtb/fcc</cachedir></fontconfig>' >/tmp/qtb/fonts.conf
#   LD_LIBRARY_PATH=/tmp/qtb/lib FONTCONFIG_FILE=/tmp/qtb/fonts.conf QT_QPA_PLATFORM=offscreen \
#     PYTHONPATH=$PWD:/tmp/qtb/site python3 scripts/make_screenshot.py --data cifar10-subset.npz --out-dir $OUT
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${1:-.venv/bin/python}
SITE=$("$PYTHON" -c "import PySide6, os; print(os.path.dirname(os.path.dirname(PySide6.__file__)))")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
D=$WORK/site/PySide6
mkdir -p "$D/Qt/lib" "$D/Qt/plugins/platforms" "$WORK/lib" "$WORK/fonts"
cp "$SITE"/PySide6/{__init__,_config,_git_pyside_version}.py "$D/"
cp "$SITE"/PySide6/{QtCore,QtGui,QtWidgets,QtOpenGL,QtOpenGLWidgets,QtSvg}.abi3.so "$SITE"/PySide6/libpyside6.abi3.so.* "$D/"
for lib in Core Gui Widgets DBus OpenGL OpenGLWidgets Svg; do cp -L "$SITE/PySide6/Qt/lib/libQt6$lib.so.6" "$D/Qt/lib/"; done
cp -L "$SITE"/PySide6/Qt/lib/libicu*.so.* "$D/Qt/lib/"
cp "$SITE/PySide6/Qt/plugins/platforms/libqoffscreen.so" "$D/Qt/plugins/platforms/"
cp -a "$SITE/shiboken6" "$SITE/pyqtgraph" "$WORK/site/"
rm -rf "$WORK/site/pyqtgraph/examples"
find "$WORK/site" -name __pycache__ -prune -exec rm -rf {} +
# The system libraries Qt links, except the C and C++ runtimes (the target's own are newer or equal).
for f in $(ldd "$D"/Qt/lib/*.so.6 "$D"/Qt/plugins/platforms/*.so "$D"/*.so* 2>/dev/null | awk '/=> \//{print $3}' | sort -u); do
  case $(basename "$f") in
    libc.so*|libm.so*|libpthread*|libdl.so*|libgcc_s*|libstdc++*|librt*|libQt6*|libicu*|libpyside*|libshiboken*) ;;
    *) cp -L "$f" "$WORK/lib/" ;;
  esac
done
for font in DejaVuSans DejaVuSans:bold DejaVuSansMono; do cp "$(fc-match -f '%{file}' "$font")" "$WORK/fonts/"; done
mkdir -p .qt
tar -C "$WORK" -cJf .qt/qtbundle.tar.xz site lib fonts
ls -la .qt/qtbundle.tar.xz
