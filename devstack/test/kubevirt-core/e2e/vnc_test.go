package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/kubevirt-core/pkg/console"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
)

// testVNC opens a VM's VNC stream as `virtctl vnc` does (through virt-api and virt-handler to
// QEMU's VNC socket) and speaks RFB over it: version, security, the ServerInit with the
// framebuffer's size and the desktop name, then one non-incremental framebuffer update, read to
// the last pixel.
func testVNC(t *testing.T, c *cluster, kc client.Client, ns string) {
	vm := newVM(ns, "vnc")
	createVM(t, kc, vm)
	waitRunning(t, kc, ns, vm.Name, "")

	var conn *console.Conn
	eventually(t, time.Minute, "open VNC", func(ctx context.Context) error {
		var err error
		conn, err = console.Open(ctx, c.rest, ns, vm.Name, "vnc")
		return err
	})
	defer conn.Close()
	// The RFB reads below block; a stuck server must fail the test, not hang it.
	watchdog := time.AfterFunc(2*time.Minute, func() { _ = conn.Close() })
	defer watchdog.Stop()

	rfb := &rfbClient{r: bufio.NewReader(conn), w: conn}
	init, err := rfb.handshake()
	if err != nil {
		t.Fatalf("RFB handshake: %v", err)
	}
	probe := &kubevirtv1.VirtualMachineInstance{}
	probe.Namespace, probe.Name = ns, vm.Name
	// QEMU names the desktop after the guest: libvirt's -name, the domain's name.
	if want := "QEMU (" + converter.DomainName(probe) + ")"; init.name != want {
		t.Errorf("desktop name %q, want %q", init.name, want)
	}
	if init.width == 0 || init.height == 0 || init.bitsPerPixel%8 != 0 || init.bitsPerPixel == 0 {
		t.Fatalf("ServerInit %+v", init)
	}
	t.Logf("VNC desktop %q %dx%d, %d bits per pixel", init.name, init.width, init.height, init.bitsPerPixel)

	pixels, err := rfb.fullUpdate(init)
	if err != nil {
		t.Fatalf("framebuffer update: %v", err)
	}
	// A booting guest may switch video modes under the request, so the update can cover less
	// than the screen ServerInit announced (its rectangles are checked to lie within it).
	screen := int(init.width) * int(init.height) * int(init.bitsPerPixel/8)
	if pixels == 0 || pixels > screen {
		t.Errorf("update carried %d bytes of pixels, want some and at most the screen's %d", pixels, screen)
	}
	t.Logf("framebuffer update: %d of the screen's %d bytes", pixels, screen)
}

// rfbClient is the client side of RFB 3.8 (RFC 6143), as much as the test needs.
type rfbClient struct {
	r *bufio.Reader
	w io.Writer
}

type serverInit struct {
	width, height uint16
	bitsPerPixel  uint8
	name          string
}

const rfbVersion = "RFB 003.008\n"

func (c *rfbClient) read(v any) error { return binary.Read(c.r, binary.BigEndian, v) }

func (c *rfbClient) write(v ...any) error {
	for _, x := range v {
		if err := binary.Write(c.w, binary.BigEndian, x); err != nil {
			return err
		}
	}
	return nil
}

// handshake agrees on version 3.8 and security None, shares the desktop, and returns ServerInit.
func (c *rfbClient) handshake() (serverInit, error) {
	var init serverInit
	version := make([]byte, len(rfbVersion))
	if _, err := io.ReadFull(c.r, version); err != nil {
		return init, fmt.Errorf("server version: %w", err)
	}
	if string(version) != rfbVersion {
		return init, fmt.Errorf("server version %q, want %q", version, rfbVersion)
	}
	if _, err := io.WriteString(c.w, rfbVersion); err != nil {
		return init, err
	}
	var n uint8
	if err := c.read(&n); err != nil {
		return init, fmt.Errorf("security types: %w", err)
	}
	if n == 0 {
		return init, fmt.Errorf("server refused: %s", c.reason())
	}
	types := make([]byte, n)
	if _, err := io.ReadFull(c.r, types); err != nil {
		return init, err
	}
	const securityNone = 1
	if !slices.Contains(types, securityNone) {
		return init, fmt.Errorf("security types %v lack None", types)
	}
	if err := c.write(uint8(securityNone)); err != nil {
		return init, err
	}
	var result uint32
	if err := c.read(&result); err != nil {
		return init, fmt.Errorf("security result: %w", err)
	}
	if result != 0 {
		return init, fmt.Errorf("security failed: %s", c.reason())
	}
	// ClientInit: share the desktop with other clients.
	if err := c.write(uint8(1)); err != nil {
		return init, err
	}
	var fixed struct {
		Width, Height                   uint16
		BitsPerPixel, Depth             uint8
		BigEndian, TrueColour           uint8
		RedMax, GreenMax, BlueMax       uint16
		RedShift, GreenShift, BlueShift uint8
		_                               [3]byte
		NameLength                      uint32
	}
	if err := c.read(&fixed); err != nil {
		return init, fmt.Errorf("ServerInit: %w", err)
	}
	name := make([]byte, fixed.NameLength)
	if _, err := io.ReadFull(c.r, name); err != nil {
		return init, err
	}
	return serverInit{width: fixed.Width, height: fixed.Height, bitsPerPixel: fixed.BitsPerPixel, name: string(name)}, nil
}

func (c *rfbClient) reason() string {
	var n uint32
	if err := c.read(&n); err != nil {
		return err.Error()
	}
	b := make([]byte, n)
	_, _ = io.ReadFull(c.r, b)
	return string(b)
}

// fullUpdate asks for the whole screen in Raw encoding and returns how many bytes of pixels the
// answer carried; every rectangle must lie within the screen.
func (c *rfbClient) fullUpdate(init serverInit) (int, error) {
	const setEncodings, updateRequest, rawEncoding = 2, 3, 0
	if err := c.write(uint8(setEncodings), uint8(0), uint16(1), int32(rawEncoding)); err != nil {
		return 0, err
	}
	if err := c.write(uint8(updateRequest), uint8(0), uint16(0), uint16(0), init.width, init.height); err != nil {
		return 0, err
	}
	for {
		var typ uint8
		if err := c.read(&typ); err != nil {
			return 0, err
		}
		switch typ {
		case 0: // FramebufferUpdate
			var hdr struct {
				_     uint8
				Rects uint16
			}
			if err := c.read(&hdr); err != nil {
				return 0, err
			}
			total := 0
			for range hdr.Rects {
				var rect struct {
					X, Y, W, H uint16
					Encoding   int32
				}
				if err := c.read(&rect); err != nil {
					return 0, err
				}
				if rect.Encoding != rawEncoding {
					return 0, fmt.Errorf("rectangle in encoding %d, asked for Raw only", rect.Encoding)
				}
				if int(rect.X)+int(rect.W) > int(init.width) || int(rect.Y)+int(rect.H) > int(init.height) {
					return 0, fmt.Errorf("rectangle %+v outside the %dx%d screen", rect, init.width, init.height)
				}
				n := int(rect.W) * int(rect.H) * int(init.bitsPerPixel/8)
				if _, err := io.CopyN(io.Discard, c.r, int64(n)); err != nil {
					return 0, fmt.Errorf("pixels of %+v: %w", rect, err)
				}
				total += n
			}
			return total, nil
		case 2: // Bell
		case 3: // ServerCutText
			var hdr struct {
				_   [3]byte
				Len uint32
			}
			if err := c.read(&hdr); err != nil {
				return 0, err
			}
			if _, err := io.CopyN(io.Discard, c.r, int64(hdr.Len)); err != nil {
				return 0, err
			}
		default:
			return 0, fmt.Errorf("unexpected server message type %d", typ)
		}
	}
}
