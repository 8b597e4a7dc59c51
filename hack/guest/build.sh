#!/usr/bin/env bash
# Builds the tiny test guest from installed Debian packages only (no network): the cloud kernel
# from /boot, a busybox initramfs whose init reads the NoCloud/ConfigDrive ISO (see rootfs/), and a
# bootable disk (FAT + syslinux) carrying both, for containerDisk and PVC tests. The initramfs carries
# qemu-ga, which the init starts on the guest agent's virtio-serial port.
#
# Output: <cache>/guest/<kernel-version>/{vmlinuz,initrd.img,disk.qcow2,cmdline}, where <cache> is
# D8V_CACHE, $XDG_CACHE_HOME/d8-virtualization or ~/.cache/d8-virtualization (as build-k8s.sh).
# Idempotent: a stamp holds a hash of every input, so it rebuilds only when something changed. The
# output directory is the last line printed.
#
# Needs: linux-image-cloud-amd64 busybox-static cpio kmod syslinux syslinux-common mtools dosfstools
# qemu-utils (hack/install-deps.sh installs them); qemu-guest-agent is taken from Debian's package.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rootfs="$here/rootfs"
cache_root="${D8V_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/d8-virtualization}"

# The newest cloud kernel installed; D8V_GUEST_KERNEL picks another.
kver="${D8V_GUEST_KERNEL:-}"
if [ -z "$kver" ]; then
  kver="$(ls /boot/vmlinuz-*-cloud-amd64 2>/dev/null | sed 's|^/boot/vmlinuz-||' | sort -V | tail -n 1)"
fi
if [ -z "$kver" ] || [ ! -r "/boot/vmlinuz-$kver" ] || [ ! -d "/lib/modules/$kver" ]; then
  echo "guest: no Debian cloud kernel in /boot and /lib/modules (install linux-image-cloud-amd64)" >&2
  exit 1
fi

# Drivers the guest needs, by name; modprobe resolves their dependencies in load order. virtio for
# disks, NICs and the console; SCSI and ATA for cdroms on virtio-scsi or the i440fx IDE bus (the
# cloud kernel has no AHCI, so SATA cdroms are not supported); isofs for the cloud-init ISO; button
# and evdev for the ACPI power button that acpid listens to.
modules=(
  virtio_pci virtio_blk virtio_net virtio_console virtio_scsi virtio_rng
  sd_mod sr_mod ata_piix ata_generic isofs button evdev
)

# qemu-guest-agent: the installed binary, else the one of Debian's package, downloaded once into the
# cache (apt-get download: no install, nothing starts on the host). Its libraries come from the
# host (ldd), which has them as QEMU's and libvirt's own.
qga="/usr/sbin/qemu-ga"
if [ ! -x "$qga" ]; then
  debs="$cache_root/debs"
  qga="$debs/qemu-guest-agent/usr/sbin/qemu-ga"
  if [ ! -x "$qga" ]; then
    mkdir -p "$debs"
    dl="$(mktemp -d "$debs/.dl.XXXXXX")"
    # A machine that never ran apt-get update has no package lists to download from.
    (cd "$dl" && { apt-get download -q qemu-guest-agent >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null 2>&1 && apt-get download -q qemu-guest-agent >/dev/null 2>&1; }; }) || {
      rm -rf "$dl"
      echo "guest: cannot get qemu-guest-agent (apt-get download qemu-guest-agent failed)" >&2
      exit 1
    }
    dpkg-deb -x "$dl"/qemu-guest-agent_*.deb "$dl/x"
    mv -T "$dl/x" "$debs/qemu-guest-agent" 2>/dev/null || true # another build may have won the race
    rm -rf "$dl"
  fi
fi

out="$cache_root/guest/$kver"
stamp_want="$(
  {
    echo "kernel $kver $(stat -c '%s %Y' "/boot/vmlinuz-$kver")"
    echo "busybox $(stat -c '%s %Y' /bin/busybox)"
    echo "qemu-ga $(stat -c '%s %Y' "$qga")"
    echo "modules ${modules[*]}"
    sha256sum "$here/build.sh"
    (cd "$rootfs" && find . -type f | LC_ALL=C sort | xargs sha256sum)
  } | sha256sum | cut -d' ' -f1
)"

up_to_date() {
  [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp_want" ] &&
    [ -f "$out/vmlinuz" ] && [ -f "$out/initrd.img" ] && [ -f "$out/disk.qcow2" ]
}

if up_to_date; then
  echo "$out"
  exit 0
fi

# Tests build the image from several processes at once: one builds, the others wait for it.
mkdir -p "$cache_root/guest"
exec 9>"$cache_root/guest/.lock"
flock 9
if up_to_date; then
  echo "$out"
  exit 0
fi

for tool in busybox cpio modprobe syslinux mcopy mkfs.fat qemu-img; do
  command -v "$tool" >/dev/null || { echo "guest: $tool not found (run hack/install-deps.sh)" >&2; exit 1; }
done

echo "guest: building kernel $kver into $out" >&2
work="$(mktemp -d "$cache_root/guest/.build.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# --- initramfs ---
root="$work/root"
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,run,tmp,mnt,root,lib/modules,var/log}
cp /bin/busybox "$root/bin/busybox"
for applet in $(/bin/busybox --list); do
  [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done
# The kernel runs /init; as busybox init it reads /etc/inittab.
ln -s bin/busybox "$root/init"
ln -s ../bin/busybox "$root/sbin/init"
cp -r "$rootfs/." "$root/"
chmod 0755 "$root/etc/init.d/rcS" "$root/etc/init.d/rcK" "$root/etc/udhcpc.script" "$root/etc/acpi/PWRF/00000080" "$root/sbin/shutdown"

# qemu-ga with the shared libraries and the loader it needs, at the paths ldd resolved them to.
mkdir -p "$root/usr/sbin"
cp "$qga" "$root/usr/sbin/qemu-ga"
for lib in $(ldd "$qga" | grep -o '/[^ ]*'); do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done

# modprobe --show-depends prints one `insmod <path>` per module, dependencies first; built-in
# modules print `builtin <name>` and need nothing.
: >"$root/etc/modules"
for m in "${modules[@]}"; do
  modprobe -S "$kver" --show-depends "$m" | while read -r verb path _; do
    [ "$verb" = insmod ] || continue
    rel="${path#/lib/modules/$kver/}"
    plain="${rel%.xz}"
    plain="${plain%.zst}"
    grep -qxF "$plain" "$root/etc/modules" && continue
    mkdir -p "$root/lib/modules/$(dirname "$rel")"
    # Debian may ship compressed modules; busybox insmod wants them plain.
    case "$rel" in
    *.ko.xz) xz -dc "$path" >"$root/lib/modules/$plain" ;;
    *.ko.zst) zstd -qdc "$path" >"$root/lib/modules/$plain" ;;
    *) cp "$path" "$root/lib/modules/$plain" ;;
    esac
    rel="$plain"
    echo "$rel" >>"$root/etc/modules"
  done
done

(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --owner 0:0 --quiet) |
  gzip -9 >"$work/initrd.img"
cp "/boot/vmlinuz-$kver" "$work/vmlinuz"

# The kernel command line of the direct kernel boot and of the disk. ttyS0 last: it becomes
# /dev/console, where init, user-data output and the marker line go; tty0 keeps VNC useful.
cmdline="console=tty0 console=ttyS0,115200 panic=-1"
echo "$cmdline" >"$work/cmdline"

# --- bootable disk ---
# A "superfloppy": one FAT file system over the whole disk with syslinux in its boot sector, which
# SeaBIOS boots directly. mtools and the mtools-based syslinux installer write into the image file,
# so no loop device or mount is needed.
cat >"$work/syslinux.cfg" <<EOF
SERIAL 0 115200
DEFAULT linux
PROMPT 0
TIMEOUT 0
LABEL linux
  KERNEL vmlinuz
  INITRD initrd.img
  APPEND $cmdline
EOF
size_mb=$(( ($(stat -c %s "$work/vmlinuz") + $(stat -c %s "$work/initrd.img")) / 1048576 + 8 ))
truncate -s "${size_mb}M" "$work/disk.raw"
mkfs.fat -n D8VGUEST "$work/disk.raw" >/dev/null
syslinux --install "$work/disk.raw"
mcopy -i "$work/disk.raw" "$work/vmlinuz" "$work/initrd.img" "$work/syslinux.cfg" ::
qemu-img convert -q -f raw -O qcow2 "$work/disk.raw" "$work/disk.qcow2"
rm -f "$work/disk.raw" "$work/syslinux.cfg"
rm -rf "$root"

# QEMU may run as libvirt-qemu: everything readable by all (the cache root itself may sit in a
# private home; a libvirtd that runs QEMU as another user needs a readable cache location).
echo "$stamp_want" >"$work/stamp"
chmod 0755 "$work"
chmod 0644 "$work"/*
rm -rf "$out"
mv "$work" "$out"
trap - EXIT
echo "$out"
