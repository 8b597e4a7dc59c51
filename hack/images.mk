# containerDisk images of the local stack. There is no registry and no container runtime: a node
# agent's pods find a containerDisk image's disk in the image store, as
# <store>/<url.PathEscape(image reference)>/disk.qcow2 (virt-launcher reads the same layout).
# Included from the root Makefile.
#
#   make image-import IMAGE=registry.example/d8v/disks/alpine:3.20 DISK=~/alpine.qcow2
#   make image-import IMAGE=... DISK=... IMAGE_STORE=/srv/d8v-images

IMAGE_STORE ?= $(D8V_CACHE)/images

.PHONY: image-import
image-import: $(DEVCLUSTER) ## Copy a qcow2 (DISK=) into the image store as the containerDisk image IMAGE=.
	@test -n "$(IMAGE)" -a -n "$(DISK)" || { echo "usage: make image-import IMAGE=<reference> DISK=<file.qcow2> [IMAGE_STORE=dir]" >&2; exit 2; }
	$(DEVCLUSTER) image-import -store "$(IMAGE_STORE)" "$(IMAGE)" "$(DISK)"
