package imagepull

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ContainerDiskImage is a containerDisk image of a disk file: one layer holding it as
// disk/disk.qcow2 (read-only, owned by 107 as KubeVirt's images have it).
func ContainerDiskImage(disk string) (v1.Image, error) {
	st, err := os.Stat(disk)
	if err != nil {
		return nil, fmt.Errorf("containerDisk: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		f, err := os.Open(disk)
		if err != nil {
			return nil, err
		}
		pr, pw := io.Pipe()
		go func() {
			defer f.Close()
			tw := tar.NewWriter(pw)
			err := tw.WriteHeader(&tar.Header{Name: "disk/", Typeflag: tar.TypeDir, Mode: 0o555, Uid: 107, Gid: 107})
			if err == nil {
				err = tw.WriteHeader(&tar.Header{Name: "disk/disk.qcow2", Typeflag: tar.TypeReg, Mode: 0o444, Uid: 107, Gid: 107, Size: st.Size()})
			}
			if err == nil {
				_, err = io.Copy(tw, f)
			}
			if err == nil {
				err = tw.Close()
			}
			pw.CloseWithError(err)
		}()
		return pr, nil
	})
	if err != nil {
		return nil, fmt.Errorf("containerDisk layer: %w", err)
	}
	return mutate.AppendLayers(empty.Image, layer)
}

// DialFunc dials a registry.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// ClusterDialer dials with names resolved by the DNS server at dnsAddr (host:port), a name
// <svc>.<ns>.svc completed with the cluster domain as a pod's search path would, so that a node
// reaches registries by their Service names (dvcr.d8-virtualization.svc), as nodes whose resolver
// knows the cluster domain do.
func ClusterDialer(dnsAddr, domain string) DialFunc {
	d := &net.Dialer{Timeout: 10 * time.Second, Resolver: &net.Resolver{PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var dd net.Dialer
			return dd.DialContext(ctx, network, dnsAddr)
		}}}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err == nil && strings.HasSuffix(host, ".svc") {
			addr = net.JoinHostPort(host+"."+domain+".", port)
		}
		return d.DialContext(ctx, network, addr)
	}
}

// HostDialer dials with the host's resolver.
func HostDialer() DialFunc { return (&net.Dialer{Timeout: 10 * time.Second}).DialContext }
