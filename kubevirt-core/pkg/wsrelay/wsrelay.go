// Package wsrelay moves the bytes of KubeVirt's console and VNC streams: WebSockets with the
// plain.kubevirt.io subprotocol, whose binary messages carry the raw bytes of the guest's serial
// port or VNC server.
package wsrelay

import (
	"io"
	"time"

	"github.com/gorilla/websocket"
)

// PlainSubprotocol is the WebSocket subprotocol of KubeVirt's console and VNC streams.
const PlainSubprotocol = "plain.kubevirt.io"

// Raw copies between a WebSocket (binary messages) and a byte stream until either side ends.
func Raw(ws *websocket.Conn, raw io.ReadWriter) {
	done := make(chan struct{}, 2)
	go func() {
		defer func() { done <- struct{}{} }()
		buf := make([]byte, 32<<10)
		for {
			n, err := raw.Read(buf)
			if n > 0 {
				if werr := ws.WriteMessage(websocket.BinaryMessage, buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
				return
			}
		}
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		for {
			_, r, err := ws.NextReader()
			if err != nil {
				return
			}
			if _, err := io.Copy(raw, r); err != nil {
				return
			}
		}
	}()
	<-done
}

// Pair copies messages between two WebSockets (virt-api between the client and virt-handler)
// until either side ends; then both are closed.
func Pair(a, b *websocket.Conn) {
	done := make(chan struct{}, 2)
	pipe := func(dst, src *websocket.Conn) {
		defer func() { done <- struct{}{} }()
		for {
			typ, r, err := src.NextReader()
			if err != nil {
				code := websocket.CloseNormalClosure
				if ce, ok := err.(*websocket.CloseError); ok {
					code = ce.Code
				}
				_ = dst.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(time.Second))
				return
			}
			w, err := dst.NextWriter(typ)
			if err != nil {
				return
			}
			if _, err := io.Copy(w, r); err != nil {
				return
			}
			if err := w.Close(); err != nil {
				return
			}
		}
	}
	go pipe(a, b)
	go pipe(b, a)
	<-done
	_ = a.Close()
	_ = b.Close()
}
