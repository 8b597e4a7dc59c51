package main

import (
	"strings"
	"testing"

	"github.com/d8virt/logopts"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

func TestParseLogOptions(t *testing.T) {
	base := []string{"--source-url=http://10.0.0.1/d.qcow2", "--destination-file=/data/disk.img"}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want logopts.Options
		err  string
	}{
		{name: "default", args: base, want: logopts.Default()},
		{name: "flags", args: append(base, "--log-level=debug", "--log-format=text"), want: logopts.Options{Level: "debug", Format: "text"}},
		{name: "environment", args: base, env: map[string]string{contract.EnvPrefix + "LOG_FORMAT": "text"}, want: logopts.Options{Level: "info", Format: "text"}},
		{name: "flag over environment", args: append(base, "--log-level=warn"), env: map[string]string{contract.EnvPrefix + "LOG_LEVEL": "error"}, want: logopts.Options{Level: "warn", Format: "json"}},
		{name: "bad level", args: append(base, "--log-level=loud"), err: `--log-level "loud": want debug, info, warn or error`},
		{name: "bad format", args: append(base, "--log-format=xml"), err: `--log-format "xml": want json or text`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parse(tc.args, func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || o.log != tc.want {
				t.Fatalf("log %+v (%v), want %+v", o.log, err, tc.want)
			}
		})
	}
}

func TestParseInspect(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{name: "a URL", args: []string{"--inspect", "--source-url=http://10.0.0.1/d.img.gz"}},
		{name: "an image", args: []string{"--inspect", "--source-image=reg/disk:1"}},
		{name: "with a destination", args: []string{"--inspect", "--source-url=http://x/d", "--destination-file=/data/disk.img"}, err: "--inspect takes a URL or an image, and no destination"},
		{name: "an upload", args: []string{"--inspect", "--source-upload-address=:8090", "--upload-token-file=/t"}, err: "--inspect takes a URL or an image"},
		{name: "no destination without it", args: []string{"--source-url=http://x/d"}, err: "give exactly one of --destination-image and --destination-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parse(tc.args, func(string) string { return "" })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !o.inspect {
				t.Fatalf("options %+v, %v", o, err)
			}
		})
	}
}

func TestParseSourcesAndExport(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{name: "an export", args: []string{"--export-file=/source/disk.img", "--export-token-file=/t"}},
		{name: "a URL with a token", args: []string{"--source-url=http://10.0.0.1:8090/export", "--source-token-file=/t", "--destination-image=dvcr/vi/a:latest"}},
		{name: "a file", args: []string{"--source-file=/source/disk.img", "--destination-file=/data/disk.img"}},
		{name: "a file and a URL", args: []string{"--source-file=/source/disk.img", "--source-url=http://x/d", "--destination-file=/data/disk.img"}, err: "give exactly one of --source-url, --source-image, --source-file and --source-upload-address"},
		{name: "an export without a token", args: []string{"--export-file=/dev/source"}, err: "--export-file goes with --export-token-file"},
		{name: "an export with a source", args: []string{"--export-file=/d", "--export-token-file=/t", "--source-url=http://x/d"}, err: "--export-file takes no source, destination or --inspect"},
		{name: "an export with a destination", args: []string{"--export-file=/d", "--export-token-file=/t", "--destination-file=/data/disk.img"}, err: "--export-file takes no source"},
		{name: "an image's export", args: []string{"--export-image=dvcr/cvi/a:latest", "--source-auth-file=/pull/.dockerconfigjson", "--source-ca-bundle=/tls/ca.crt", "--export-token-file=/t"}},
		{name: "an image's export without a token", args: []string{"--export-image=dvcr/cvi/a:latest"}, err: "--export-image goes with --export-token-file"},
		{name: "an image's export with an image source", args: []string{"--export-image=dvcr/cvi/a:latest", "--export-token-file=/t", "--source-image=dvcr/cvi/b:latest"}, err: "--export-image takes no source, destination or --inspect"},
		{name: "both exports", args: []string{"--export-image=dvcr/cvi/a:latest", "--export-file=/d", "--export-token-file=/t"}, err: "give one of --export-file and --export-image"},
		{name: "a file's export with registry credentials", args: []string{"--export-file=/d", "--export-token-file=/t", "--source-auth-file=/a"}, err: "--source-auth-file and --source-ca-bundle go with --export-image"},
		{name: "a token without a URL", args: []string{"--source-image=reg/disk:1", "--source-token-file=/t", "--destination-file=/d"}, err: "--source-token-file goes with --source-url"},
		{name: "an upload staged, then exported", args: []string{"--source-upload-address=:8090", "--upload-token-file=/t", "--destination-file=/scratch/disk.img", "--then-export", "--export-address=:8091", "--export-token-file=/t"}},
		{name: "then-export without a token", args: []string{"--source-upload-address=:8090", "--upload-token-file=/t", "--destination-file=/scratch/disk.img", "--then-export"}, err: "--then-export goes with --destination-file and --export-token-file"},
		{name: "then-export into DVCR", args: []string{"--source-url=http://x/d", "--destination-image=dvcr/vi/a:latest", "--then-export", "--export-token-file=/t"}, err: "--then-export goes with --destination-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.args, func(string) string { return "" })
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("err %v, want %q", err, tc.err)
			}
		})
	}
}
