#!/usr/bin/env bash
# Build a tiny image from Debian's busybox-static (no registry is reachable): usage: make_busybox_image.sh TAG
set -euo pipefail
TAG=${1:-pai-test/busybox:latest}
if docker image inspect "$TAG" >/dev/null 2>&1; then exit 0; fi
BB=$(command -v busybox || echo /bin/busybox)
DIR=$(mktemp -d)
mkdir -p "$DIR/bin" "$DIR/tmp" "$DIR/etc"
cp "$BB" "$DIR/bin/busybox"
for c in $("$DIR/bin/busybox" --list); do [ "$c" = busybox ] || ln -s busybox "$DIR/bin/$c"; done
echo "root:x:0:0:root:/root:/bin/sh" > "$DIR/etc/passwd"
tar -C "$DIR" -c . | docker import -c 'ENV PATH=/bin' - "$TAG" >/dev/null
rm -rf "$DIR"
echo "built $TAG"
