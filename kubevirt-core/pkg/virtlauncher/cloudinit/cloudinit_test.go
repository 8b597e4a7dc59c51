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
		want    NoCloud
		wantErr string
	}{
		{
			name: "plain user data, name as hostname",
			src:  kubevirtv1.CloudInitNoCloudSource{UserData: "#cloud-config\n", NetworkData: "version: 2\n"},
			want: NoCloud{MetaData: "instance-id: ns1.vm1\nlocal-hostname: vm1\n", UserData: "#cloud-config\n", NetworkData: "version: 2\n"},
		},
		{
			name: "base64 data and explicit hostname",
			host: "guest",
			src: kubevirtv1.CloudInitNoCloudSource{
				UserDataBase64:    base64.StdEncoding.EncodeToString([]byte("#!/bin/sh\n")),
				NetworkDataBase64: base64.StdEncoding.EncodeToString([]byte("version: 1\n")),
			},
			want: NoCloud{MetaData: "instance-id: ns1.vm1\nlocal-hostname: guest\n", UserData: "#!/bin/sh\n", NetworkData: "version: 1\n"},
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
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestWriteISO(t *testing.T) {
	if _, err := exec.LookPath("xorriso"); err != nil {
		if _, err := exec.LookPath("genisoimage"); err != nil {
			t.Skip("no ISO tool installed")
		}
	}
	path := filepath.Join(t.TempDir(), "noCloud.iso")
	if err := WriteISO(context.Background(), path, NoCloud{MetaData: "instance-id: a\n", UserData: "#cloud-config\n", NetworkData: "version: 2\n"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The ISO 9660 primary volume descriptor sits at 32 KiB; its volume identifier at offset 40.
	if len(b) < 0x8000+72 || string(b[0x8001:0x8006]) != "CD001" {
		t.Fatal("not an ISO 9660 image")
	}
	if label := strings.TrimSpace(string(b[0x8028 : 0x8028+32])); label != "cidata" {
		t.Fatalf("volume label %q, want cidata", label)
	}
	for _, s := range []string{"instance-id: a", "#cloud-config", "version: 2"} {
		if !strings.Contains(string(b), s) {
			t.Errorf("ISO lacks %q", s)
		}
	}
}
