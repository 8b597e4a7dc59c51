package main

import (
	"flag"
	"testing"
)

func TestApplyEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		want    string
		wantErr bool
	}{
		{name: "default", want: "latest"},
		{name: "environment", env: map[string]string{"VIRT_OPERATOR_IMAGE_TAG": "dev"}, want: "dev"},
		{name: "command line wins", env: map[string]string{"VIRT_OPERATOR_IMAGE_TAG": "dev"}, args: []string{"--image-tag=v1"}, want: "v1"},
		{name: "bad value", env: map[string]string{"VIRT_OPERATOR_REPLICAS": "two"}, want: "latest", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			tag := fs.String("image-tag", "latest", "")
			fs.Int("replicas", 2, "")
			err := applyEnv(fs)
			if (err != nil) != tt.wantErr {
				t.Fatalf("applyEnv: %v", err)
			}
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if *tag != tt.want {
				t.Errorf("image tag %q, want %q", *tag, tt.want)
			}
		})
	}
}
