#!/usr/bin/env bash
# The StreamLens OCI image from Debian 12 packages, with no registry and no daemon:
#
#   tools/make-image.sh BINARY [ARCHIVE]      (make image: the release build, then this)
#
#   1. Its own tools from Debian, idempotently: mmdebstrap (the root file system), buildah (the
#      commit), podman and runc (to load and run the result; crun fails on this kind of host).
#   2. A payload staged in a scratch folder: the stripped binary; exactly the Swift runtime and
#      OpenVINO libraries `ldd` says it needs, plus the OpenVINO plugins and frontends it loads
#      by name, all in /usr/lib/streamlens (one ld.so.conf.d entry); the console's files, Models/,
#      Pipelines/ and the catalogue files the shipped manifests name (the model store).
#   3. mmdebstrap: Debian's runtime packages only (no recommends, no -dev, no compilers), docs,
#      man pages and locales left out, and the files a headless server never loads (Mesa's
#      drivers and LLVM, GTK, icons); the payload synced in, the user made, and the binary run in
#      the new root on a test pipeline that decodes H.264 and runs a model (every GStreamer
#      plugin must load).
#   4. buildah (vfs, a scratch --root): the tarball as one layer, the config (user 10001,
#      entrypoint, command, environment, labels), committed as an oci-archive.
#
# Variables: IMAGE_EXTRA_PACKAGES (more Debian packages, e.g. intel-opencl-icd for device=GPU),
# IMAGE_MIRRORS (apt source lines, newline-separated), IMAGE_TAG (latest: the image is
# localhost/streamlens:TAG; its version is a label), IMAGE_SOURCE, IMAGE_LICENSES (labels),
# IMAGE_DEB_CACHE (where downloaded .debs are kept between builds; default .deps/image-debs).
# Exits non-zero, saying why, on any failure; the archive is replaced only by a complete one.
set -euo pipefail
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
say() { printf 'make-image: %s\n' "$*"; }
die() { printf 'make-image: %s\n' "$*" >&2; exit 1; }

# The image's layout.
PREFIX=/usr/lib/streamlens            # the Swift runtime and OpenVINO, one dynamic-linker entry
SHARE=/usr/share/streamlens           # WORKDIR: Models/, Pipelines/, models/ (the store), console/
USER_ID=10001

# --- In the new root (mmdebstrap runs this as a customize hook: "$SELF" --customize ROOT) ------
if [ "${1:-}" = --customize ]; then
  R=$2
  chown -R 0:0 "$R/usr/bin/streamlens" "$R$PREFIX" "$R$SHARE"
  echo "$PREFIX" >"$R/etc/ld.so.conf.d/streamlens.conf"
  chroot "$R" ldconfig
  chroot "$R" groupadd --gid $USER_ID streamlens
  chroot "$R" useradd --uid $USER_ID --gid $USER_ID --create-home --home-dir /home/streamlens \
    --shell /usr/sbin/nologin --comment StreamLens streamlens
  # The state and outputs' usual place (a volume there starts owned by the user); the home's
  # .cache holds OpenVINO's compiled models and GStreamer's registry.
  install -d -o $USER_ID -g $USER_ID "$R/var/lib/streamlens" "$R/home/streamlens/.cache"
  # Every program and library in the image finds the libraries it links: ours (the Swift
  # runtime and OpenVINO's modules were picked by ldd on the build machine), and what the
  # path-excludes leave out must be linked by nothing that stays.
  missing=$(chroot "$R" sh -c 'find /usr -xdev -type f \( -name "*.so" -o -name "*.so.*" -o -perm -u+x \) |
    while read -r f; do ldd "$f" 2>/dev/null | sed -n "s|^\s*\(\S*\) => not found|$f: \1|p"; done' | sort -u)
  [ -z "$missing" ] || die "libraries missing in the image (leave out what needs them, or add the package that has them):
$missing"
  # A pipeline that decodes H.264 (gst-libav) and runs a catalogue model on OpenVINO's CPU
  # plugin, as the image's user, from the WORKDIR: every plugin must load (the registry scan
  # runs with the files left out above), and the model store must resolve.
  home=$(chroot "$R" mktemp -d)
  chroot "$R" chown $USER_ID "$home"
  set +e
  # XDG_CACHE_HOME too: the compiled-model cache follows the user's passwd home, not HOME, and
  # must not be left in the image (it is this machine's CPU's).
  out=$(chroot --userspec=$USER_ID:$USER_ID "$R" env -i HOME="$home" XDG_CACHE_HOME="$home/.cache" PATH=/usr/bin:/bin \
    STREAMLENS_MODELS=$SHARE/models GST_DEBUG=GST_PLUGIN_LOADING:2 sh -c "cd $SHARE && exec streamlens run -q \
    'videotestsrc num-buffers=20 ! video/x-raw,width=320,height=240 ! x264enc ! h264parse ! avdec_h264 ! videoconvert ! video/x-raw,format=BGRx ! lensdetect model=Models/face-short-range.json ! fakesink'" 2>&1)
  rc=$?
  set -e
  rm -rf "${R:?}$home"
  [ $rc = 0 ] || die "the test pipeline failed inside the image (exit $rc):
$out"
  if grep -q 'Failed to load plugin' <<<"$out"; then
    die "GStreamer plugins do not load inside the image (a file they need is left out: see DPKG_EXCLUDES):
$(grep 'Failed to load plugin' <<<"$out")"
  fi
  echo "make-image: the test pipeline ran inside the image (H.264 decode, lensdetect on the CPU)"
  exit 0
fi

# --- 1. Tools ------------------------------------------------------------------------------
cd "$(dirname "$SELF")/.."
[ -f Package.swift ] || die "run from a StreamLens checkout"
source tools/lib/debian.sh
BIN=${1:?usage: tools/make-image.sh BINARY [ARCHIVE]   (make image builds the binary first)}
ARCHIVE=${2:-out/streamlens-image.tar}
[ -x "$BIN" ] || die "no executable at $BIN (make image builds it: swift build -c release --product streamlens)"
TOOLS=(mmdebstrap buildah podman runc)
install_missing "${TOOLS[@]}"

# --- 2. The payload -------------------------------------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/streamlens-image.XXXXXX")
B=(buildah --root "$WORK/containers" --runroot "$WORK/run" --storage-driver vfs)
cleanup() {
  as_root "${B[@]}" rm --all >/dev/null 2>&1 || true
  as_root rm -rf "$WORK"
}
trap cleanup EXIT
P=$WORK/payload
mkdir -p "$P/usr/bin" "$P$PREFIX" "$P$SHARE"

# OpenVINO: the prefix set-up installed, where the dynamic linker finds libopenvino_c.
OV=$(ldd "$BIN" | sed -n 's|.*libopenvino_c\.so[^ ]* => \(/[^ ]*\)/libopenvino_c.*|\1|p')
[ -n "$OV" ] || die "$BIN does not find libopenvino_c (make setup installs OpenVINO)"
# OpenVINO loads its device plugins and model readers by name from its own folder; ldd does not
# list them. Not taken: the NPU plugin (the image has no NPU driver) and the readers of formats
# StreamLens never reads (its manifests name ONNX and TFLite files; compiled models are IR).
ov_modules=()
for f in "$OV"/*; do
  case $(basename "$f") in
    libopenvino_intel_npu_plugin.so | libopenvino_*_frontend.so*) ;;
    libopenvino_*_plugin.so) ov_modules+=("$f") ;;
    # The GPU plugin's tuned kernel choices (8.4 MB): only of use with Intel's OpenCL runtime,
    # which the image has when it is asked for (the C API itself does not read it)
    cache.json) if [[ " ${IMAGE_EXTRA_PACKAGES:-} " == *" intel-opencl-icd "* ]]; then ov_modules+=("$f"); fi ;;
    libtbbmalloc.so.* | libtbbbind_*.so.* | libhwloc.so.*) ov_modules+=("$f") ;;  # TBB opens them when present
  esac
done
for r in ir onnx tensorflow_lite; do ov_modules+=("$OV"/libopenvino_${r}_frontend.so.*); done
# Exactly the libraries that the binary and those modules need (ldd: the whole closure) from
# outside Debian's folders: the Swift toolchain's (/opt/swift) and OpenVINO's prefix. Everything
# else comes from Debian's packages (the customize step checks that nothing is missing).
libs=$( { ldd "$BIN"; for f in "${ov_modules[@]}"; do if [[ $f == *.so* ]]; then ldd "$f"; fi; done; } \
  | awk '$2 == "=>" && $3 ~ "^/" && $3 !~ "^/(usr/)?lib(32|64|x32)?/" {print $3}' | sort -u)
for f in $libs "${ov_modules[@]}"; do cp -L "$f" "$P$PREFIX/$(basename "$f")"; done
# Symbols and debug information are not needed to run (the binary carries ~10 MB of DWARF, the
# toolchain's libraries ~13 MB of symbols); OpenVINO's come stripped already.
if command -v strip >/dev/null; then
  strip -o "$P/usr/bin/streamlens" "$BIN"
  for f in "$P$PREFIX"/*.so*; do strip --strip-unneeded "$f"; done
else
  say "no strip here (binutils): the binary and libraries go in unstripped"
  cp "$BIN" "$P/usr/bin/streamlens"
fi
chmod 0755 "$P/usr/bin/streamlens"
# The console's files, which SwiftPM puts beside the binary (STREAMLENS_CONSOLE names them).
CONSOLE=$(dirname "$BIN")/StreamLens_StreamLensAPI.resources/Console
[ -f "$CONSOLE/index.html" ] || die "no console files at $CONSOLE"
cp -R "$CONSOLE" "$P$SHARE/console"
cp -R Models Pipelines "$P$SHARE/"
# The model store: each catalogue file a shipped manifest names (catalogue:NAME/FILE), with its
# model's licence, checked against the catalogue's sha256 first.
refs=$(grep -ho '"catalogue:[^"]*"' Models/*.json | tr -d '"' | sed 's/^catalogue://' | sort -u)
names=$(cut -d/ -f1 <<<"$refs" | sort -u)
# shellcheck disable=SC2086
python3 tools/models.py verify $names >"$WORK/verify.log" 2>&1 \
  || die "the model store is missing or has wrong files the manifests name: $(grep -v ': ok' "$WORK/verify.log" | tr '\n' ' ')(make setup, or streamlens models fetch NAME)"
STORE=$(python3 tools/models.py path)
for ref in $refs; do
  mkdir -p "$P$SHARE/models/${ref%%/*}"
  cp "$STORE/$ref" "$P$SHARE/models/$ref"
  for l in "$STORE/${ref%%/*}"/LICENSE*; do [ -f "$l" ] && cp "$l" "$P$SHARE/models/${ref%%/*}/"; done
done
chmod -R a+rX,go-w "$P"

# --- 3. The root file system ----------------------------------------------------------------
PACKAGES=(
  # GStreamer 1.22 and the plugins pipelines use; gst-rtsp-server (lensrtsp); libnice (WebRTC)
  libgstreamer1.0-0 gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad
  gstreamer1.0-plugins-ugly gstreamer1.0-libav libgstrtspserver-1.0-0 gstreamer1.0-nice
  # the HTTP server, serve --config's parser, MQTT, Kafka, NATS, drawing and its font, TLS roots
  libsoup-3.0-0 libyaml-0-2 libmosquitto1 librdkafka1 libnats3.4 libcairo2 fonts-dejavu-core ca-certificates
  # OpenVINO's GPU plugin links the OpenCL loader (device=GPU needs an ICD too: intel-opencl-icd)
  ocl-icd-libopencl1
  # A session bus for dconf (GTK's settings, a dependency of plugins-bad): dbus-x11 instead of
  # dbus-user-session, which would bring systemd (~13 MB) into a container that never boots it
  dbus-x11
)
# shellcheck disable=SC2206
PACKAGES+=(${IMAGE_EXTRA_PACKAGES:-})
# Quoted: patterns for dpkg (whose * also matches /), not for this shell.
DPKG_EXCLUDES=(
  '/usr/share/doc/*' '/usr/share/man/*' '/usr/share/info/*' '/usr/share/locale/*'
  '/usr/share/lintian/*' '/usr/share/bug/*'
  # Mesa's GL drivers and the LLVM 15 they alone link: only a GL context loads them
  '/usr/lib/x86_64-linux-gnu/dri/*' '/usr/lib/x86_64-linux-gnu/libLLVM-15.so*'
  # GTK (plugins-bad's gtkwaylandsink, a window) with its modules, libcaca's GL window (its
  # libraries are not installed), and the icon and keyboard data of desktops
  '/usr/lib/x86_64-linux-gnu/libgtk-3.so*' '/usr/lib/x86_64-linux-gnu/libgdk-3.so*'
  '/usr/lib/x86_64-linux-gnu/libgailutil-3.so*' '/usr/lib/x86_64-linux-gnu/gstreamer-1.0/libgstgtkwayland.so'
  '/usr/lib/x86_64-linux-gnu/gtk-3.0/*' '/usr/lib/x86_64-linux-gnu/libgtk-3-0/*'
  '/usr/lib/x86_64-linux-gnu/caca/libgl_plugin.so*'
  '/usr/share/icons/*' '/usr/share/X11/xkb/*'
  # Intel Media SDK's hardware runtime (~27 MB): libavcodec links only its dispatcher (libmfx.so.1,
  # kept), which opens these for Quick Sync, and that needs a VA driver the image does not have
  '/usr/lib/x86_64-linux-gnu/libmfxhw64.so*' '/usr/lib/x86_64-linux-gnu/mfx/*'
  '/usr/lib/x86_64-linux-gnu/libmfx-tracer.so*'
  # a speech voice nothing links (libavfilter links the others)
  '/usr/lib/x86_64-linux-gnu/libflite_cmu_time_awb.so*'
)
# Z3 (22 MB) is linked by LLVM alone: left out unless more packages are asked for (Intel's
# compute runtime brings LLVM 14, which links it).
[ -n "${IMAGE_EXTRA_PACKAGES:-}" ] || DPKG_EXCLUDES+=('/usr/lib/x86_64-linux-gnu/libz3.so*')
DPKG_INCLUDES=(
  '/usr/share/doc/*/copyright'         # the licences stay
  '/usr/share/locale/locale.alias'
  '/usr/share/icons/*/index.theme' '/usr/share/icons/*/cursor.theme'   # update-alternatives needs them
)
dpkgopts=()
for p in "${DPKG_EXCLUDES[@]}"; do dpkgopts+=(--dpkgopt="path-exclude=$p"); done
for p in "${DPKG_INCLUDES[@]}"; do dpkgopts+=(--dpkgopt="path-include=$p"); done
MIRRORS=${IMAGE_MIRRORS:-"deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main"}
# Downloaded packages are kept for the next build (mmdebstrap's documented cache hooks).
DEBS=${IMAGE_DEB_CACHE:-$PWD/.deps/image-debs}
mkdir -p "$DEBS"
say "mmdebstrap: Debian 12 with ${#PACKAGES[@]} packages and their dependencies (no recommends)"
# The merged-usr hook makes /bin, /lib… links itself, as debootstrap does, instead of installing
# usrmerge, which needs perl (~50 MB).
if ! as_root mmdebstrap --mode=root --variant=apt --format=tar --skip=output/dev \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --aptopt='Apt::Install-Recommends "false"' "${dpkgopts[@]}" \
    --include="$(IFS=,; echo "${PACKAGES[*]}")" \
    --skip=download/empty --skip=essential/unlink \
    --setup-hook='mkdir -p "$1"/var/cache/apt/archives' \
    --setup-hook="sync-in $DEBS /var/cache/apt/archives" \
    --customize-hook="sync-out /var/cache/apt/archives $DEBS" \
    --customize-hook="sync-in $P /" \
    --customize-hook="\"$SELF\" --customize \"\$1\"" \
    bookworm "$WORK/rootfs.tar" "$MIRRORS" >"$WORK/mmdebstrap.log" 2>&1; then
  LOG=${ARCHIVE%.tar}-mmdebstrap.log
  cp "$WORK/mmdebstrap.log" "$LOG"
  { grep -E '^(E:|dpkg: error|make-image:)|error:' "$LOG" || tail -20 "$LOG"; } | head -20 >&2
  die "mmdebstrap failed (its errors above; the whole log: $LOG)"
fi
grep '^make-image:' "$WORK/mmdebstrap.log" || true

# --- 4. The image ---------------------------------------------------------------------------
VERSION=$("$BIN" --version | awk '{print $2}')
REVISION=$(git rev-parse HEAD)
[ -z "$(git status --porcelain --untracked-files=no)" ] || say "note: the checkout has uncommitted changes; the revision label says $REVISION"
SOURCE=${IMAGE_SOURCE:-$(git config --get remote.origin.url || echo unknown)}
LICENSES=${IMAGE_LICENSES:-NOASSERTION}
TAG=${IMAGE_TAG:-latest}
ctr=$(as_root "${B[@]}" from scratch)
as_root "${B[@]}" add "$ctr" "$WORK/rootfs.tar" / >/dev/null
as_root "${B[@]}" config \
  --user $USER_ID:$USER_ID --workingdir $SHARE \
  --env PATH=/usr/local/bin:/usr/bin:/bin \
  --env STREAMLENS_MODELS=$SHARE/models --env STREAMLENS_PIPELINES=$SHARE/Pipelines \
  --env STREAMLENS_CONSOLE=$SHARE/console \
  --entrypoint '["/usr/bin/streamlens"]' --cmd '["serve", "--config", "/config/streamlens.yaml"]' \
  --stop-signal SIGTERM \
  --label org.opencontainers.image.title=StreamLens \
  --label "org.opencontainers.image.description=Neural video stages in GStreamer pipelines (streamlens serve)" \
  --label org.opencontainers.image.version="$VERSION" \
  --label org.opencontainers.image.revision="$REVISION" \
  --label org.opencontainers.image.source="$SOURCE" \
  --label org.opencontainers.image.licenses="$LICENSES" \
  --label org.opencontainers.image.created="$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  --label org.opencontainers.image.base.name=debian:bookworm \
  "$ctr"
mkdir -p "$(dirname "$ARCHIVE")"
rm -f "$ARCHIVE.part"
as_root "${B[@]}" commit --quiet --rm --format oci --disable-compression=false "$ctr" "oci-archive:$ARCHIVE.part:streamlens:$TAG" >/dev/null
[ "$(id -u)" = 0 ] || as_root chown "$(id -u):$(id -g)" "$ARCHIVE.part"
mv -f "$ARCHIVE.part" "$ARCHIVE"
size=$(tar -tvf "$WORK/rootfs.tar" | awk '{s+=$3} END {printf "%d", s/1048576}')
say "wrote $ARCHIVE (localhost/streamlens:$TAG, version $VERSION, revision ${REVISION:0:12}; $size MiB unpacked)"
say "run it: podman load -i $ARCHIVE, then see docs/deploy.md (The image)"
