# containerDisk images of the local stack. A node agent's pods find a containerDisk image's disk in
# the image store, as <store>/<url.PathEscape(image reference)>/disk.qcow2 (virt-launcher reads the
# same layout); a node agent that pulls one from a registry (DVCR) puts it there too.
# Included from the root Makefile.
#
#   make image-import                         # the tiny guest, as dvcr.d8-virtualization.svc/local/tiny-guest:latest
#   make image-import NAME=alpine DISK=~/alpine.qcow2
#   bin/devcluster image-import [-store DIR] IMAGE DISK   # a copy into the image store, no registry

.PHONY: image-import
image-import: $(DEVCLUSTER) ## Push a qcow2 (DISK=, default the tiny guest) into the module's DVCR as the containerDisk image local/NAME:latest (NAME=tiny-guest).
	@disk="$(DISK)"; if [ -z "$$disk" ]; then disk=$$(bash hack/guest/build.sh | tail -1)/disk.qcow2; fi; \
	$(DEVCLUSTER) --name $(STACK) --port-base $(PORT_BASE) image-push "$(or $(NAME),tiny-guest)" "$$disk"
