#!/usr/bin/env bash
# Installs the Debian packages the project needs on a fresh Debian 12 machine, as root. Idempotent:
# when every package is already installed it does nothing, not even `apt-get update`.
#
# The set covers the local network (iproute2), the local stack's volumes (losetup from util-linux,
# mkfs.ext4, e2fsck and resize2fs from e2fsprogs), the node side (libvirt with the sysv init variant,
# since there is no systemd, QEMU for TCG guests, ISO tools for cloud-init) and the tiny guest
# image (the Debian cloud kernel and a static busybox), the prometheus package (promtool for the
# chart's alert rules and their unit tests, and the server the module e2e test runs on the stack),
# and docker-registry (distribution 2.8), which the previous release's DVCR runs in the module e2e's
# upgrade test (this checkout's DVCR runs distribution v3, which hack/build-k8s.sh builds).
set -euo pipefail

packages=(
  ca-certificates iproute2 iptables util-linux procps curl e2fsprogs
  libvirt-daemon-system libvirt-daemon-system-sysv libvirt-dev pkg-config
  qemu-system-x86 qemu-utils xorriso genisoimage
  busybox-static cpio linux-image-cloud-amd64 syslinux syslinux-common mtools dosfstools
  prometheus docker-registry
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: need root to install: ${missing[*]}" >&2
  exit 1
fi

echo "[install-deps] installing ${missing[*]}" >&2
# There is no init system to start services with: keep package scripts from trying. The project
# starts virtlogd and libvirtd itself.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod +x "$policy"
  created_policy=1
fi
trap '[ "$created_policy" = 1 ] && rm -f "$policy"' EXIT

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The package's own service stays off, now and after a reboot: tests run the server themselves,
# with a configuration and a data directory of their own.
if [[ " ${missing[*]} " == *" prometheus "* ]]; then
  update-rc.d prometheus disable >/dev/null 2>&1 || true
  if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
fi
echo "[install-deps] done" >&2
