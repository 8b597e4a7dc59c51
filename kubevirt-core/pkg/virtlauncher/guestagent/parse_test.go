package guestagent

import (
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirt"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// Answers as qemu-ga 7.2 in the test guest gives them.
const (
	infoAnswer       = `{"return":{"version":"7.2.19","supported_commands":[{"enabled":true,"name":"guest-get-osinfo","success-response":true},{"enabled":false,"name":"guest-exec","success-response":true}]}}`
	osInfoAnswer     = `{"return":{"name":"d8v-guest","kernel-release":"6.1.0-57-cloud-amd64","version":"1","pretty-name":"d8v test guest","version-id":"1","kernel-version":"#1 SMP PREEMPT_DYNAMIC Debian 6.1.158-1","machine":"x86_64","id":"d8v-guest"}}`
	hostNameAnswer   = `{"return":{"host-name":"agent-vm"}}`
	timezoneAnswer   = `{"return":{"zone":"CET","offset":3600}}`
	usersAnswer      = `{"return":[{"user":"root","login-time":1764428400.25},{"user":"Administrator","domain":"WIN","login-time":1.5}]}`
	fsInfoAnswer     = `{"return":[{"name":"vda1","mountpoint":"/","type":"ext4","used-bytes":1024,"total-bytes":4096,"disk":[{"serial":"D1","bus-type":"virtio","bus":0,"unit":0,"target":0}]},{"name":"sr0","mountpoint":"/mnt","type":"iso9660","used-bytes":0,"total-bytes":0,"disk":[]}]}`
	interfacesAnswer = `{"return":[{"name":"lo","hardware-address":"00:00:00:00:00:00","ip-addresses":[{"ip-address-type":"ipv4","ip-address":"127.0.0.1","prefix":8}]},{"name":"eth0","hardware-address":"02:6a:00:00:00:01","ip-addresses":[{"ip-address-type":"ipv6","ip-address":"fe80::1","prefix":64},{"ip-address-type":"ipv4","ip-address":"10.0.2.2","prefix":24}]},{"name":"eth1","hardware-address":"02:6a:00:00:00:02"}]}`
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		parse   func(string) (any, error)
		answer  string
		want    any
		wantErr string
	}{
		{
			name: "guest-info",
			parse: func(a string) (any, error) {
				v, c, err := parseInfo(a)
				return struct {
					V string
					C []kubevirtv1.GuestAgentCommandInfo
				}{v, c}, err
			},
			answer: infoAnswer,
			want: struct {
				V string
				C []kubevirtv1.GuestAgentCommandInfo
			}{"7.2.19", []kubevirtv1.GuestAgentCommandInfo{{Name: "guest-get-osinfo", Enabled: true}, {Name: "guest-exec"}}},
		},
		{
			name:   "guest-get-osinfo",
			parse:  func(a string) (any, error) { return parseOSInfo(a) },
			answer: osInfoAnswer,
			want: kubevirtv1.VirtualMachineInstanceGuestOSInfo{
				Name: "d8v-guest", KernelRelease: "6.1.0-57-cloud-amd64", Version: "1", PrettyName: "d8v test guest",
				VersionID: "1", KernelVersion: "#1 SMP PREEMPT_DYNAMIC Debian 6.1.158-1", Machine: "x86_64", ID: "d8v-guest",
			},
		},
		{
			name:   "guest-get-osinfo of a guest without os-release",
			parse:  func(a string) (any, error) { return parseOSInfo(a) },
			answer: `{"return":{"kernel-release":"6.1.0","machine":"x86_64"}}`,
			want:   kubevirtv1.VirtualMachineInstanceGuestOSInfo{KernelRelease: "6.1.0", Machine: "x86_64"},
		},
		{
			name:   "guest-get-host-name",
			parse:  func(a string) (any, error) { return parseHostName(a) },
			answer: hostNameAnswer,
			want:   "agent-vm",
		},
		{
			name:   "guest-get-timezone as KubeVirt formats it",
			parse:  func(a string) (any, error) { return parseTimezone(a) },
			answer: timezoneAnswer,
			want:   "CET, 3600",
		},
		{
			name:   "guest-get-timezone UTC",
			parse:  func(a string) (any, error) { return parseTimezone(a) },
			answer: `{"return":{"offset":0}}`,
			want:   ", 0",
		},
		{
			name:   "guest-get-users",
			parse:  func(a string) (any, error) { return parseUsers(a) },
			answer: usersAnswer,
			want: []kubevirtv1.VirtualMachineInstanceGuestOSUser{
				{UserName: "root", LoginTime: 1764428400.25},
				{UserName: "Administrator", Domain: "WIN", LoginTime: 1.5},
			},
		},
		{
			name:   "guest-get-users with nobody logged in",
			parse:  func(a string) (any, error) { return parseUsers(a) },
			answer: `{"return":[]}`,
			want:   []kubevirtv1.VirtualMachineInstanceGuestOSUser(nil),
		},
		{
			name:   "guest-get-fsinfo",
			parse:  func(a string) (any, error) { return parseFSInfo(a) },
			answer: fsInfoAnswer,
			want: []kubevirtv1.VirtualMachineInstanceFileSystem{
				{DiskName: "vda1", MountPoint: "/", FileSystemType: "ext4", UsedBytes: 1024, TotalBytes: 4096,
					Disk: []kubevirtv1.VirtualMachineInstanceFileSystemDisk{{Serial: "D1", BusType: "virtio"}}},
				{DiskName: "sr0", MountPoint: "/mnt", FileSystemType: "iso9660"},
			},
		},
		{
			name:   "guest-network-get-interfaces: no loopback, IPv4 first",
			parse:  func(a string) (any, error) { return parseInterfaces(a) },
			answer: interfacesAnswer,
			want: []launcherapi.GuestInterface{
				{InterfaceName: "eth0", MAC: "02:6a:00:00:00:01", IPs: []string{"10.0.2.2", "fe80::1"}},
				{InterfaceName: "eth1", MAC: "02:6a:00:00:00:02"},
			},
		},
		{
			name:    "not JSON",
			parse:   func(a string) (any, error) { return parseHostName(a) },
			answer:  `{"return":`,
			wantErr: "decode agent answer",
		},
		{
			name:    "no return member",
			parse:   func(a string) (any, error) { return parseOSInfo(a) },
			answer:  `{"error":{"class":"GenericError","desc":"x"}}`,
			wantErr: "without a return value",
		},
		{
			name:    "wrong shape",
			parse:   func(a string) (any, error) { return parseUsers(a) },
			answer:  `{"return":{"user":"root"}}`,
			wantErr: "decode agent answer",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.parse(tt.answer)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

// fakeAgent answers commands from a table; a missing command fails as libvirt does for an agent
// that does not know it.
type fakeAgent map[string]string

func (f fakeAgent) QemuAgentCommand(cmd string, _ libvirt.DomainQemuAgentCommandTimeout, _ uint32) (string, error) {
	for name, answer := range f {
		if cmd == `{"execute":"`+name+`"}` {
			return answer, nil
		}
	}
	return "", errors.New("The command " + cmd + " has not been found")
}

func TestRead(t *testing.T) {
	all := fakeAgent{
		cmdInfo: infoAnswer, cmdOSInfo: osInfoAnswer, cmdHostName: hostNameAnswer, cmdTimezone: timezoneAnswer,
		cmdUsers: usersAnswer, cmdFSInfo: fsInfoAnswer, cmdInterfaces: interfacesAnswer,
	}
	s, err := read(all, nil, Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Info.GAVersion != "7.2.19" || s.Info.OS.ID != "d8v-guest" || s.Info.Hostname != "agent-vm" ||
		s.Info.Timezone != "CET, 3600" || len(s.Info.UserList) != 2 || len(s.Info.FSInfo.Filesystems) != 2 ||
		len(s.Interfaces) != 2 {
		t.Errorf("read everything: got %+v", s)
	}

	// One command missing leaves only its part empty.
	partial := fakeAgent{}
	for k, v := range all {
		partial[k] = v
	}
	delete(partial, cmdUsers)
	got, err := read(partial, nil, Snapshot{})
	if err == nil || !strings.Contains(err.Error(), cmdUsers) {
		t.Errorf("error = %v, want one naming %s", err, cmdUsers)
	}
	if got.Info.UserList != nil || got.Info.OS.ID != "d8v-guest" || len(got.Interfaces) != 2 {
		t.Errorf("partial read: got %+v", got)
	}
	// What a failing command told before stays.
	if got, _ := read(partial, nil, s); !reflect.DeepEqual(got, s) {
		t.Errorf("partial read after a full one: got %+v, want %+v", got, s)
	}
	// A command whose answer does not parse keeps its last value too.
	partial[cmdOSInfo] = `{"return":"garbage"}`
	if got, _ := read(partial, nil, s); got.Info.OS != s.Info.OS {
		t.Errorf("OS after a bad answer: %+v, want %+v", got.Info.OS, s.Info.OS)
	}
}

func TestPollerFollowsConnection(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	changed := make(chan struct{}, 10)
	p := New(fakeAgent{cmdOSInfo: osInfoAnswer}, up.Load, func() { changed <- struct{}{} }, nil)
	quit := make(chan struct{})
	defer close(quit)
	go p.Run(quit)

	wait := func(what string) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(5 * time.Second):
			t.Fatalf("no change after %s", what)
		}
	}
	wait("start")
	if got := p.Last().Info.OS.ID; got != "d8v-guest" {
		t.Fatalf("connected: OS id %q", got)
	}
	up.Store(false)
	p.Kick()
	wait("disconnect")
	if got := p.Last(); !reflect.DeepEqual(got, Snapshot{}) {
		t.Errorf("disconnected: snapshot %+v, want empty", got)
	}
}
