package main

import (
	"context"
	"fmt"
	"log/slog"

	"libvirt.org/go/libvirt"

	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/capscache"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/capsdump"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/libvirtd"
)

// dumpCapabilities is the node labeller's init container: the launcher's own libvirtd (the same
// daemon and configuration guests get, so the answers hold for them) tells what this node offers,
// capsdump writes it for virt-handler, and the daemon goes.
func dumpCapabilities(o *options, log *slog.Logger) error {
	d, err := libvirtd.Start(context.Background(), libvirtd.Options{Logger: log})
	if err != nil {
		return err
	}
	defer d.Stop()
	conn, err := libvirt.NewConnect(libvirtd.URI)
	if err != nil {
		return fmt.Errorf("connect to libvirt %s: %w", libvirtd.URI, err)
	}
	defer conn.Close()
	virtType := capsdump.VirtType(o.emulation, "/dev/kvm")
	if err := capsdump.Dump(conn, o.nodeLabellerDir, virtType); err != nil {
		return err
	}
	log.Info("node capabilities written", "dir", o.nodeLabellerDir, "virtType", virtType)
	if o.qemuCapsDir != "" {
		// The questions above made the daemon probe QEMU; the launchers on this node start from
		// its answers (launcherapi.QEMUCapsHostDir).
		n, err := capscache.Copy(capscache.Dir(libvirtd.CacheDir), o.qemuCapsDir)
		if err != nil {
			return err
		}
		log.Info("QEMU capabilities cache saved for the launchers", "dir", o.qemuCapsDir, "files", n)
	}
	return nil
}
