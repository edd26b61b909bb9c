#!/usr/bin/env bash
# Build a tiny image with this host's bash on top of busybox (no registry is reachable): usage: make_bash_image.sh TAG
# The runtimes run a task's commands under bash as OpenPAI does; this image shows that, busybox shows the fallback.
set -euo pipefail
TAG=${1:-pai-test/bash:latest}
if docker image inspect "$TAG" >/dev/null 2>&1; then exit 0; fi
BB=$(command -v busybox || echo /bin/busybox)
BASH_BIN=$(readlink -f "$(command -v bash)")
DIR=$(mktemp -d)
mkdir -p "$DIR/bin" "$DIR/tmp" "$DIR/etc"
cp "$BB" "$DIR/bin/busybox"
for c in $("$DIR/bin/busybox" --list); do [ "$c" = busybox ] || ln -s busybox "$DIR/bin/$c"; done
cp "$BASH_BIN" "$DIR/bin/bash"
# bash's shared libraries and loader, at the paths it was linked against
for lib in $(ldd "$BASH_BIN" | grep -o '/[^ ]*'); do
  mkdir -p "$DIR$(dirname "$lib")"
  cp -L "$lib" "$DIR$lib"
done
echo "root:x:0:0:root:/root:/bin/sh" > "$DIR/etc/passwd"
tar -C "$DIR" -c . | docker import -c 'ENV PATH=/bin' - "$TAG" >/dev/null
rm -rf "$DIR"
echo "built $TAG"
