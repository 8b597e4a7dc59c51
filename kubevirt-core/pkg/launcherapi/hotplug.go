package launcherapi

// HotplugVolume is a hotplugged volume whose disk the running domain has.
type HotplugVolume struct {
	// Name is the VMI's volume (and disk) name.
	Name string `json:"name"`
	// Target is the disk's device name in the domain (vdb, sdc, ...).
	Target string `json:"target"`
}

// HotplugFailure is a hotplugged volume the launcher could not attach to the running domain. It
// tries again on the next Sync, and the entry goes once it succeeds or the volume leaves the spec.
type HotplugFailure struct {
	// Name is the VMI's volume (and disk) name.
	Name string `json:"name"`
	// Message is why the attach failed (libvirt's error, a missing image, ...).
	Message string `json:"message"`
}
