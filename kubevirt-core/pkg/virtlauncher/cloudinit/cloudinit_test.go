package cloudinit

import (
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	k8sv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestNoCloudData(t *testing.T) {
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: "ns1"}}
	tests := []struct {
		name    string
		host    string
		src     kubevirtv1.CloudInitNoCloudSource
		want    Data
		wantErr string
	}{
		{
			name: "plain user data, name as hostname",
			src:  kubevirtv1.CloudInitNoCloudSource{UserData: "#cloud-config\n", NetworkData: "version: 2\n"},
			want: Data{Kind: NoCloud, MetaData: "instance-id: ns1.vm1\nlocal-hostname: vm1\n", UserData: "#cloud-config\n", NetworkData: "version: 2\n"},
		},
		{
			name: "base64 data and explicit hostname",
			host: "guest",
			src: kubevirtv1.CloudInitNoCloudSource{
				UserDataBase64:    base64.StdEncoding.EncodeToString([]byte("#!/bin/sh\n")),
				NetworkDataBase64: base64.StdEncoding.EncodeToString([]byte("version: 1\n")),
			},
			want: Data{Kind: NoCloud, MetaData: "instance-id: ns1.vm1\nlocal-hostname: guest\n", UserData: "#!/bin/sh\n", NetworkData: "version: 1\n"},
		},
		{
			name:    "bad base64",
			src:     kubevirtv1.CloudInitNoCloudSource{UserDataBase64: "!!"},
			wantErr: "spec.volumes[1].cloudInitNoCloud.userDataBase64",
		},
		{
			name:    "secret ref",
			src:     kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &k8sv1.LocalObjectReference{Name: "s"}},
			wantErr: "spec.volumes[1].cloudInitNoCloud.secretRef",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := vmi.DeepCopy()
			v.Spec.Hostname = tt.host
			got, err := NoCloudData(v, &tt.src, "spec.volumes[1].cloudInitNoCloud")
			checkData(t, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestConfigDriveData(t *testing.T) {
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: "ns1"}}
	const uuid = "5a3c9a5e-0d1c-4f35-9d1e-2f4f0c3a9b11"
	tests := []struct {
		name    string
		host    string
		src     kubevirtv1.CloudInitConfigDriveSource
		want    Data
		wantErr string
	}{
		{
			name: "plain user data, name as hostname",
			src:  kubevirtv1.CloudInitConfigDriveSource{UserData: "#cloud-config\n"},
			want: Data{Kind: ConfigDrive, UserData: "#cloud-config\n",
				MetaData: `{"instance_id":"vm1.ns1","hostname":"vm1","uuid":"` + uuid + `"}`},
		},
		{
			name: "base64 data and explicit hostname",
			host: "guest",
			src: kubevirtv1.CloudInitConfigDriveSource{
				UserDataBase64:    base64.StdEncoding.EncodeToString([]byte("#!/bin/sh\n")),
				NetworkDataBase64: base64.StdEncoding.EncodeToString([]byte(`{"links":[]}`)),
			},
			want: Data{Kind: ConfigDrive, UserData: "#!/bin/sh\n", NetworkData: `{"links":[]}`,
				MetaData: `{"instance_id":"vm1.ns1","hostname":"guest","uuid":"` + uuid + `"}`},
		},
		{
			name:    "bad base64",
			src:     kubevirtv1.CloudInitConfigDriveSource{NetworkDataBase64: "!!"},
			wantErr: "spec.volumes[2].cloudInitConfigDrive.networkDataBase64",
		},
		{
			name:    "network data secret ref",
			src:     kubevirtv1.CloudInitConfigDriveSource{NetworkDataSecretRef: &k8sv1.LocalObjectReference{Name: "s"}},
			wantErr: "spec.volumes[2].cloudInitConfigDrive.networkDataSecretRef",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := vmi.DeepCopy()
			v.Spec.Hostname = tt.host
			got, err := ConfigDriveData(v, &tt.src, uuid, "spec.volumes[2].cloudInitConfigDrive")
			checkData(t, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestWriteISO(t *testing.T) {
	// isoinfo comes with genisoimage, so WriteISO has a tool whenever it is there.
	if _, err := exec.LookPath("isoinfo"); err != nil {
		t.Skip("isoinfo is not installed")
	}
	tests := []struct {
		name  string
		data  Data
		files map[string]string // path on the ISO -> content; a missing file maps to ""
	}{
		{
			name: "NoCloud",
			data: Data{Kind: NoCloud, MetaData: "instance-id: a\n", UserData: "#cloud-config\n", NetworkData: "version: 2\n"},
			files: map[string]string{"/meta-data": "instance-id: a\n", "/user-data": "#cloud-config\n",
				"/network-config": "version: 2\n"},
		},
		{
			name: "ConfigDrive without network data",
			data: Data{Kind: ConfigDrive, MetaData: `{"uuid":"u"}`, UserData: "#!/bin/sh\n"},
			files: map[string]string{"/openstack/latest/meta_data.json": `{"uuid":"u"}`,
				"/openstack/latest/user_data": "#!/bin/sh\n", "/openstack/latest/network_data.json": ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cloudinit.iso")
			if err := WriteISO(context.Background(), path, tt.data); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// The ISO 9660 primary volume descriptor sits at 32 KiB; its volume identifier at
			// offset 40.
			if len(b) < 0x8000+72 || string(b[0x8001:0x8006]) != "CD001" {
				t.Fatal("not an ISO 9660 image")
			}
			if label := strings.TrimSpace(string(b[0x8028 : 0x8028+32])); label != tt.data.Kind.Label {
				t.Fatalf("volume label %q, want %q", label, tt.data.Kind.Label)
			}
			for name, want := range tt.files {
				// Rock Ridge names, as a Linux guest reads them.
				out, _ := exec.Command("isoinfo", "-R", "-i", path, "-x", name).Output()
				if string(out) != want {
					t.Errorf("%s holds %q, want %q", name, out, want)
				}
			}
			if m, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(m) != 0 {
				t.Errorf("staging files left behind: %q", m)
			}
		})
	}
}

// checkData compares what a source gave with the case's expectation: an error naming wantErr,
// or exactly want.
func checkData(t *testing.T, got Data, err error, want Data, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
