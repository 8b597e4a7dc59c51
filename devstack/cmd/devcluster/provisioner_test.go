package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestProvisionerBinary(t *testing.T) {
	bins := t.TempDir()
	def, other := filepath.Join(bins, "new"), filepath.Join(bins, "old")
	for _, p := range []string{def, other} {
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name       string
		marker     string // "" for none
		record     bool
		want       string
		wantMarker string // "" for none
	}{
		{name: "a new stack records the default", record: true, want: def, wantMarker: def},
		{name: "a command that starts nothing records nothing", want: def},
		{name: "the recorded binary wins", marker: other, record: true, want: other, wantMarker: other},
		{name: "the recorded binary wins for status too", marker: other, want: other, wantMarker: other},
		{name: "a recorded binary that is gone gives way", marker: filepath.Join(bins, "gone"), record: true, want: def, wantMarker: def},
	} {
		t.Run(tt.name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "stack")
			marker := filepath.Join(state, provisionerMarker)
			if tt.marker != "" {
				if err := os.MkdirAll(state, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(marker, []byte(tt.marker+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := provisionerBinary(state, def, tt.record)
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
			b, err := os.ReadFile(marker)
			if tt.wantMarker == "" {
				if err == nil {
					t.Errorf("marker written: %q", b)
				}
				return
			}
			if string(b) != tt.wantMarker+"\n" {
				t.Errorf("marker %q, want %q", b, tt.wantMarker)
			}
		})
	}
	if _, err := provisionerBinary(filepath.Join(t.TempDir(), "s"), filepath.Join(bins, "absent"), true); err == nil {
		t.Error("recording a binary that is not there: no error")
	}
}
