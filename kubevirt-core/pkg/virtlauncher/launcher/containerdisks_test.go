package launcher

import (
	"strings"
	"testing"
)

func TestBaseFormat(t *testing.T) {
	for _, tc := range []struct {
		name string
		info imageInfo
		want string
		err  string
	}{
		{name: "qcow2", info: imageInfo{Format: "qcow2"}, want: "qcow2"},
		{name: "raw, an ISO too", info: imageInfo{Format: "raw"}, want: "raw"},
		{name: "a backing file of its own", info: imageInfo{Format: "qcow2", BackingFilename: "/etc/shadow"}, err: "has a backing file (/etc/shadow)"},
		{name: "another format", info: imageInfo{Format: "vmdk"}, err: `image format "vmdk": a containerDisk is qcow2, raw or an ISO`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := baseFormat(tc.info)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("baseFormat = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
