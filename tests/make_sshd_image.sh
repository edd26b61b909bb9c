#!/usr/bin/env bash
# Build a small image with OpenSSH's sshd from this host's own binaries (no registry is reachable):
# busybox-static for the shell and tools, plus sshd, ssh, ssh-keygen, sftp-server and the libraries they load.
# Needs openssh-server and busybox-static on the host. Usage: make_sshd_image.sh TAG
set -euo pipefail
TAG=${1:-pai-test/sshd:latest}
if docker image inspect "$TAG" >/dev/null 2>&1; then exit 0; fi
BB=$(command -v busybox || echo /bin/busybox)
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
mkdir -p "$DIR/bin" "$DIR/tmp" "$DIR/etc/ssh" "$DIR/root" "$DIR/run/sshd" "$DIR/var/empty" "$DIR/usr/sbin" \
  "$DIR/usr/bin" "$DIR/usr/lib/openssh"
chmod 1777 "$DIR/tmp"
cp "$BB" "$DIR/bin/busybox"
for c in $("$DIR/bin/busybox" --list); do [ "$c" = busybox ] || ln -s busybox "$DIR/bin/$c"; done
bins="/usr/sbin/sshd /usr/bin/ssh /usr/bin/scp /usr/bin/ssh-keygen"
for f in /usr/lib/openssh/sftp-server /usr/lib/openssh/sshd-session /usr/lib/openssh/sshd-auth; do
  [ -e "$f" ] && bins="$bins $f"
done
for f in $bins; do cp "$f" "$DIR$f"; done
# the shared libraries (and the loader) the binaries name, at the same paths
for lib in $(ldd $bins 2>/dev/null | awk '/=> \//{print $3} /^\t\//{print $1}' | sort -u); do
  mkdir -p "$DIR$(dirname "$lib")"
  cp -L "$lib" "$DIR$lib"
done
cat >"$DIR/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
sshd:x:100:65534:sshd privilege separation:/run/sshd:/bin/false
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
printf 'root:x:0:\nnogroup:x:65534:\n' >"$DIR/etc/group"
printf 'root:*:19000:0:99999:7:::\nsshd:*:19000:0:99999:7:::\n' >"$DIR/etc/shadow"
chmod 600 "$DIR/etc/shadow"
tar -C "$DIR" -c . | docker import -c 'ENV PATH=/usr/sbin:/usr/bin:/bin' - "$TAG" >/dev/null
echo "built $TAG"
