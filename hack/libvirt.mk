# The node side's libvirt and the tiny test guest. Included from the root Makefile.
# There is no systemd: `libvirt-up` starts a private virtlogd + libvirtd (own config, sockets, logs
# and state under <cache>/libvirt/default, in its own mount namespace) and prints its URI; use it
# as `virsh -c "$(make -s libvirt-up)" list`.

.PHONY: libvirt-up libvirt-down guest-image

libvirt-up: ## Start the private libvirtd/virtlogd (idempotent, root); prints the connection URI last.
	@go run ./devstack/cmd/libvirtd up

libvirt-down: ## Destroy its running domains and stop the private libvirtd/virtlogd.
	@go run ./devstack/cmd/libvirtd down

guest-image: ## Build the tiny test guest (kernel, initrd, disk.qcow2) from Debian packages; prints its dir last.
	@bash hack/guest/build.sh
