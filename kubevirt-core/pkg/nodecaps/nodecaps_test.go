package nodecaps

import (
	"reflect"
	"slices"
	"testing"

	"libvirt.org/go/libvirtxml"
)

// testdata holds the files the init container wrote on a development machine (AMD EPYC,
// nested, virttype qemu).
func loadTestdata(t *testing.T) *Capabilities {
	t.Helper()
	c, err := Load("testdata", "x86_64")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestParseCaptured(t *testing.T) {
	c := loadTestdata(t)
	for _, tc := range []struct {
		name string
		got  any
		want any
	}{
		{"host model", c.HostModel, "EPYC"},
		{"vendor", c.Vendor, "AMD"},
		{"usable models", c.UsableModels, []string{"qemu64", "qemu32", "pentium3", "pentium2", "pentium", "n270", "kvm64", "kvm32",
			"coreduo", "core2duo", "athlon", "Westmere", "Penryn", "Opteron_G2", "Opteron_G1", "Nehalem", "Conroe", "486"}},
		{"required features", len(c.RequiredFeatures), 18},
		{"first required feature", c.RequiredFeatures[0], "acpi"},
		{"features have a required one", slices.Contains(c.Features, "avx2"), true},
		{"features lack a disabled one", slices.Contains(c.Features, "3dnowprefetch"), false},
		{"tsc", c.TSC, &libvirtxml.CapsHostCPUCounter{Name: "tsc", Frequency: 2445424000, Scaling: "no"}},
		{"q35 machine", slices.Contains(c.Machines, "q35"), true},
		{"machines once each", len(c.Machines), len(unique(c.Machines))},
		{"sev", c.SEV, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !reflect.DeepEqual(tc.got, tc.want) {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func unique(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

const minimalFeatures = `<cpu mode='custom' match='exact'><model>X</model>
  <feature policy='require' name='sse2'/><feature policy='disable' name='vmx'/></cpu>`

const minimalHostCaps = `<capabilities><host><cpu><arch>x86_64</arch></cpu></host>
  <guest><os_type>hvm</os_type><arch name='x86_64'><machine>pc-q35-7.2</machine><machine canonical='pc-q35-7.2'>q35</machine>
    <domain type='qemu'/><domain type='kvm'><machine>pc-q35-7.2</machine></domain></arch></guest>
  <guest><os_type>hvm</os_type><arch name='i686'><machine>isapc</machine></arch></guest></capabilities>`

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		domCaps string
		check   func(*Capabilities) bool
	}{
		{"no host model", `<domainCapabilities><cpu><mode name='host-model' supported='no'/>
			<mode name='custom' supported='yes'><model usable='yes'>Penryn</model><model usable='no'>Haswell</model><model>Odd</model></mode></cpu></domainCapabilities>`,
			func(c *Capabilities) bool {
				return c.HostModel == "" && slices.Equal(c.UsableModels, []string{"Penryn"})
			}},
		{"sev without es", `<domainCapabilities><features><sev supported='yes'><maxGuests>15</maxGuests></sev></features></domainCapabilities>`,
			func(c *Capabilities) bool { return c.SEV && !c.SEVES }},
		{"sev-es", `<domainCapabilities><features><sev supported='yes'><maxESGuests>3</maxESGuests></sev></features></domainCapabilities>`,
			func(c *Capabilities) bool { return c.SEV && c.SEVES }},
		{"machines of the arch, once", `<domainCapabilities/>`,
			func(c *Capabilities) bool {
				return slices.Equal(c.Machines, []string{"pc-q35-7.2", "q35"}) && c.TSC == nil
			}},
		{"features by policy", `<domainCapabilities/>`,
			func(c *Capabilities) bool { return slices.Equal(c.Features, []string{"sse2"}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.domCaps), []byte(minimalFeatures), []byte(minimalHostCaps), "x86_64")
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Errorf("unexpected %+v", c)
			}
		})
	}
	if _, err := Parse([]byte("<nope"), []byte(minimalFeatures), []byte(minimalHostCaps), "x86_64"); err == nil {
		t.Error("broken domain capabilities parsed")
	}
	if _, err := Load(t.TempDir(), "x86_64"); err == nil {
		t.Error("an empty directory loaded")
	}
}
