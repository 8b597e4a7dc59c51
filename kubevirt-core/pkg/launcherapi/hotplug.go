package launcherapi

// HotplugVolume is a hotplugged volume whose disk the running domain has.
type HotplugVolume struct {
	// Name is the VMI's volume (and disk) name.
	Name string `json:"name"`
	// Target is the disk's device name in the domain (vdb, sdc, ...).
	Target string `json:"target"`
}
