package domstats

import (
	"encoding/json"
	"testing"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"
)

func TestNamesOf(t *testing.T) {
	d := &libvirtxml.Domain{Devices: &libvirtxml.DomainDeviceList{
		Interfaces: []libvirtxml.DomainInterface{
			{Alias: &libvirtxml.DomainAlias{Name: "ua-default"}, Target: &libvirtxml.DomainInterfaceTarget{Dev: "tap0"}},
			{Alias: &libvirtxml.DomainAlias{Name: "net1"}, Target: &libvirtxml.DomainInterfaceTarget{Dev: "vnet3"}},
			{Alias: &libvirtxml.DomainAlias{Name: "ua-notarget"}},
		},
		Disks: []libvirtxml.DomainDisk{
			{Alias: &libvirtxml.DomainAlias{Name: "ua-rootdisk"}, Target: &libvirtxml.DomainDiskTarget{Dev: "vda"}},
			{Alias: &libvirtxml.DomainAlias{Name: "ua-"}, Target: &libvirtxml.DomainDiskTarget{Dev: "vdb"}},
			{Target: &libvirtxml.DomainDiskTarget{Dev: "sda"}},
		},
	}}
	got := NamesOf(d)
	if len(got.Interfaces) != 1 || got.Interfaces["tap0"] != "default" {
		t.Errorf("interfaces %v", got.Interfaces)
	}
	if len(got.Disks) != 1 || got.Disks["vda"] != "rootdisk" {
		t.Errorf("disks %v", got.Disks)
	}
	if n := NamesOf(&libvirtxml.Domain{}); len(n.Interfaces)+len(n.Disks) != 0 {
		t.Errorf("a domain without devices: %v", n)
	}
}

func TestConvert(t *testing.T) {
	names := Names{Interfaces: map[string]string{"tap0": "default"}, Disks: map[string]string{"vda": "rootdisk"}}
	for _, tc := range []struct {
		name string
		in   libvirt.DomainStats
		// want is the JSON of the result: unreported fields are absent, zeros are there.
		want string
	}{
		{"nothing reported", libvirt.DomainStats{}, `{}`},
		{"cpu, with a zero", libvirt.DomainStats{Cpu: &libvirt.DomainStatsCPU{TimeSet: true, Time: 5e9, UserSet: true, User: 0}},
			`{"cpu":{"timeNanoseconds":5000000000,"userNanoseconds":0}}`},
		{"vcpus by index and state", libvirt.DomainStats{Vcpu: []libvirt.DomainStatsVcpu{
			{StateSet: true, State: libvirt.VCPU_RUNNING, TimeSet: true, Time: 7, WaitSet: true, Wait: 1, DelaySet: true, Delay: 2},
			{StateSet: true, State: libvirt.VCPU_OFFLINE},
			{StateSet: true, State: libvirt.VCPU_BLOCKED, TimeSet: true, Time: 3},
			{},
		}}, `{"vcpus":[{"id":0,"state":"running","timeNanoseconds":7,"waitNanoseconds":1,"delayNanoseconds":2},` +
			`{"id":1,"state":"offline"},{"id":2,"state":"blocked","timeNanoseconds":3},{"id":3,"state":"unknown"}]}`},
		{"balloon KiB into bytes", libvirt.DomainStats{Balloon: &libvirt.DomainStatsBalloon{
			MaximumSet: true, Maximum: 131072, CurrentSet: true, Current: 131072, RssSet: true, Rss: 2048,
			MajorFaultSet: true, MajorFault: 3,
		}}, `{"memory":{"domainBytes":134217728,"actualBalloonBytes":134217728,"residentBytes":2097152,"majorFaults":3}}`},
		{"a guest's balloon driver", libvirt.DomainStats{Balloon: &libvirt.DomainStatsBalloon{
			AvailableSet: true, Available: 4, UnusedSet: true, Unused: 3, UsableSet: true, Usable: 2, DiskCachesSet: true, DiskCaches: 1,
			SwapInSet: true, SwapIn: 1, SwapOutSet: true, SwapOut: 0, MinorFaultSet: true, MinorFault: 9,
		}}, `{"memory":{"availableBytes":4096,"unusedBytes":3072,"usableBytes":2048,"cachedBytes":1024,"swapInBytes":1024,"swapOutBytes":0,"minorFaults":9}}`},
		{"nics by the VMI's names, others by libvirt's, nameless ones dropped", libvirt.DomainStats{Net: []libvirt.DomainStatsNet{
			{NameSet: true, Name: "tap0", RxBytesSet: true, RxBytes: 100, RxPktsSet: true, RxPkts: 2, RxErrsSet: true, RxDropSet: true, RxDrop: 1,
				TxBytesSet: true, TxBytes: 50, TxPktsSet: true, TxPkts: 1, TxErrsSet: true, TxDropSet: true},
			{NameSet: true, Name: "vnet9", RxBytesSet: true, RxBytes: 1},
			{RxBytesSet: true, RxBytes: 1},
		}}, `{"interfaces":[{"name":"default","rxBytes":100,"rxPackets":2,"rxErrors":0,"rxDropped":1,"txBytes":50,"txPackets":1,"txErrors":0,"txDropped":0},` +
			`{"name":"vnet9","rxBytes":1}]}`},
		{"disks by the VMI's names", libvirt.DomainStats{Block: []libvirt.DomainStatsBlock{
			{NameSet: true, Name: "vda", RdReqsSet: true, RdReqs: 10, RdBytesSet: true, RdBytes: 4096, RdTimesSet: true, RdTimes: 5,
				WrReqsSet: true, WrReqs: 1, WrBytesSet: true, WrBytes: 512, WrTimesSet: true, WrTimes: 6, FlReqsSet: true, FlReqs: 2, FlTimesSet: true, FlTimes: 7},
			{NameSet: true, Name: "sdz"},
			{RdBytesSet: true},
		}}, `{"disks":[{"name":"rootdisk","readRequests":10,"readBytes":4096,"readNanoseconds":5,"writeRequests":1,"writeBytes":512,` +
			`"writeNanoseconds":6,"flushRequests":2,"flushNanoseconds":7},{"name":"sdz"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(Convert(tc.in, names))
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("got  %s\nwant %s", b, tc.want)
			}
		})
	}
}
