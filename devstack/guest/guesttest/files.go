package guesttest

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"testing"

	"github.com/d8virt/devstack/guest"
)

// ImportFiles are what tests of image imports serve, by file name: the tiny guest's disk as
// qcow2 ("disk.qcow2") and gzipped ("disk.qcow2.gz"), a NoCloud ISO ("cidata.iso"), and an HTML
// page that is no disk image ("index.html").
func ImportFiles(t testing.TB, ctx context.Context) map[string][]byte {
	t.Helper()
	img, err := guest.BuildImage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	qcow2, err := os.ReadFile(img.Disk)
	if err != nil {
		t.Fatal(err)
	}
	iso, err := guest.NoCloudISO(t.TempDir(), "instance-id: iso\n", "#!/bin/sh\ntrue\n")
	if err != nil {
		t.Fatal(err)
	}
	isoData, err := os.ReadFile(iso)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"disk.qcow2":    qcow2,
		"disk.qcow2.gz": Gzip(qcow2),
		"cidata.iso":    isoData,
		"index.html":    []byte("<!DOCTYPE html>\n<html><body>Download our image!</body></html>\n"),
	}
}

// Gzip is b gzipped.
func Gzip(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}
