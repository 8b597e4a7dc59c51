// Package guestagent reads what the QEMU guest agent in a guest tells about it (OS, host name,
// time zone, users, filesystems, NICs) through libvirt's agent channel, polling it as KubeVirt's
// launcher does, and keeps the last answers for the launcher's status and its GuestInfo call.
package guestagent

import (
	"encoding/json"
	"fmt"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// The agent commands the poller runs, as qemu-ga names them.
const (
	cmdInfo       = "guest-info"
	cmdOSInfo     = "guest-get-osinfo"
	cmdHostName   = "guest-get-host-name"
	cmdTimezone   = "guest-get-timezone"
	cmdUsers      = "guest-get-users"
	cmdFSInfo     = "guest-get-fsinfo"
	cmdInterfaces = "guest-network-get-interfaces"
)

// unwrap decodes the "return" member of an agent answer into T. libvirt already turns an agent's
// "error" answer into a Go error, so an answer without "return" is malformed.
func unwrap[T any](answer string) (T, error) {
	var out struct {
		Return *T `json:"return"`
	}
	var zero T
	if err := json.Unmarshal([]byte(answer), &out); err != nil {
		return zero, fmt.Errorf("decode agent answer: %w", err)
	}
	if out.Return == nil {
		return zero, fmt.Errorf("agent answer without a return value: %.200s", answer)
	}
	return *out.Return, nil
}

// parseInfo reads guest-info: the agent's version and the commands it offers.
func parseInfo(answer string) (version string, cmds []kubevirtv1.GuestAgentCommandInfo, err error) {
	r, err := unwrap[struct {
		Version  string `json:"version"`
		Commands []struct {
			Name    string `json:"name"`
			Enabled bool   `json:"enabled"`
		} `json:"supported_commands"`
	}](answer)
	if err != nil {
		return "", nil, err
	}
	for _, c := range r.Commands {
		cmds = append(cmds, kubevirtv1.GuestAgentCommandInfo{Name: c.Name, Enabled: c.Enabled})
	}
	return r.Version, cmds, nil
}

// parseOSInfo reads guest-get-osinfo (os-release and uname in the guest).
func parseOSInfo(answer string) (kubevirtv1.VirtualMachineInstanceGuestOSInfo, error) {
	r, err := unwrap[struct {
		Name          string `json:"name"`
		KernelRelease string `json:"kernel-release"`
		Version       string `json:"version"`
		PrettyName    string `json:"pretty-name"`
		VersionID     string `json:"version-id"`
		KernelVersion string `json:"kernel-version"`
		Machine       string `json:"machine"`
		ID            string `json:"id"`
	}](answer)
	if err != nil {
		return kubevirtv1.VirtualMachineInstanceGuestOSInfo{}, err
	}
	return kubevirtv1.VirtualMachineInstanceGuestOSInfo{
		Name: r.Name, KernelRelease: r.KernelRelease, Version: r.Version, PrettyName: r.PrettyName,
		VersionID: r.VersionID, KernelVersion: r.KernelVersion, Machine: r.Machine, ID: r.ID,
	}, nil
}

// parseHostName reads guest-get-host-name.
func parseHostName(answer string) (string, error) {
	r, err := unwrap[struct {
		HostName string `json:"host-name"`
	}](answer)
	return r.HostName, err
}

// parseTimezone reads guest-get-timezone into KubeVirt's "<zone>, <offset seconds>".
func parseTimezone(answer string) (string, error) {
	r, err := unwrap[struct {
		Zone   string `json:"zone"`
		Offset int    `json:"offset"`
	}](answer)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s, %d", r.Zone, r.Offset), nil
}

// parseUsers reads guest-get-users: the users logged in, with their login time in seconds.
func parseUsers(answer string) ([]kubevirtv1.VirtualMachineInstanceGuestOSUser, error) {
	r, err := unwrap[[]struct {
		User      string  `json:"user"`
		Domain    string  `json:"domain"`
		LoginTime float64 `json:"login-time"`
	}](answer)
	if err != nil {
		return nil, err
	}
	var out []kubevirtv1.VirtualMachineInstanceGuestOSUser
	for _, u := range r {
		out = append(out, kubevirtv1.VirtualMachineInstanceGuestOSUser{UserName: u.User, Domain: u.Domain, LoginTime: u.LoginTime})
	}
	return out, nil
}

// parseFSInfo reads guest-get-fsinfo: mounted filesystems with usage and the disks under them.
func parseFSInfo(answer string) ([]kubevirtv1.VirtualMachineInstanceFileSystem, error) {
	r, err := unwrap[[]struct {
		Name       string `json:"name"`
		MountPoint string `json:"mountpoint"`
		Type       string `json:"type"`
		UsedBytes  int    `json:"used-bytes"`
		TotalBytes int    `json:"total-bytes"`
		Disk       []struct {
			Serial  string `json:"serial"`
			BusType string `json:"bus-type"`
		} `json:"disk"`
	}](answer)
	if err != nil {
		return nil, err
	}
	var out []kubevirtv1.VirtualMachineInstanceFileSystem
	for _, fs := range r {
		f := kubevirtv1.VirtualMachineInstanceFileSystem{
			DiskName: fs.Name, MountPoint: fs.MountPoint, FileSystemType: fs.Type,
			UsedBytes: fs.UsedBytes, TotalBytes: fs.TotalBytes,
		}
		for _, d := range fs.Disk {
			f.Disk = append(f.Disk, kubevirtv1.VirtualMachineInstanceFileSystemDisk{Serial: d.Serial, BusType: d.BusType})
		}
		out = append(out, f)
	}
	return out, nil
}

// parseInterfaces reads guest-network-get-interfaces, without loopback (as KubeVirt). IPv4
// addresses come first: KubeVirt reports an interface's first IPv4 address as its primary one.
func parseInterfaces(answer string) ([]launcherapi.GuestInterface, error) {
	r, err := unwrap[[]struct {
		Name  string `json:"name"`
		MAC   string `json:"hardware-address"`
		Addrs []struct {
			Type string `json:"ip-address-type"`
			Addr string `json:"ip-address"`
		} `json:"ip-addresses"`
	}](answer)
	if err != nil {
		return nil, err
	}
	var out []launcherapi.GuestInterface
	for _, nic := range r {
		if nic.Name == "lo" {
			continue
		}
		g := launcherapi.GuestInterface{InterfaceName: nic.Name, MAC: nic.MAC}
		var v6 []string
		for _, a := range nic.Addrs {
			if a.Type == "ipv4" {
				g.IPs = append(g.IPs, a.Addr)
			} else {
				v6 = append(v6, a.Addr)
			}
		}
		g.IPs = append(g.IPs, v6...)
		out = append(out, g)
	}
	return out, nil
}
