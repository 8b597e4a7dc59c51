// Package relay moves the messages of a WebSocket stream between a client and the core's
// virt-api: message types kept, keep-alive pings on both legs so an idle console stays open, a
// close from one side passed on with its code and answered from the other (half-close), and the
// bytes counted each way.
package relay

import (
	"errors"
	"io"
	"net"
	"time"

	"github.com/gorilla/websocket"
)

// The directions of Config.Count.
const (
	ToGuest  = "to_guest"
	ToClient = "to_client"
)

// Config tunes a relay.
type Config struct {
	// PingInterval is how often each leg is pinged; a leg that answers neither pings nor
	// anything else for three intervals is dead.
	PingInterval time.Duration
	// CloseGrace is how long the second side has to answer a close passed on to it.
	CloseGrace time.Duration
	// Count is told the payload bytes of each message, by direction (ToGuest, ToClient).
	Count func(direction string, n int)
}

// Run relays between client and upstream until both sides closed (or one side closed and the
// other did not answer within CloseGrace), then closes both connections. It returns the close
// code the client was sent.
func (c Config) Run(client, upstream *websocket.Conn) int {
	stop := make(chan struct{})
	defer close(stop)
	for _, conn := range []*websocket.Conn{client, upstream} {
		c.prepare(conn, stop)
	}
	toClient := make(chan int, 1)
	done := make(chan struct{}, 2)
	go func() {
		c.pipe(upstream, client, ToGuest)
		done <- struct{}{}
	}()
	go func() {
		toClient <- c.pipe(client, upstream, ToClient)
		done <- struct{}{}
	}()
	<-done
	select {
	case <-done:
	case <-time.After(c.CloseGrace):
	}
	_ = client.Close()
	_ = upstream.Close()
	select {
	case code := <-toClient:
		return code
	default:
		return websocket.CloseAbnormalClosure
	}
}

// prepare pings conn every interval and extends its read deadline whenever it answers. A close
// from conn is not answered at once (gorilla's default): it is passed on, and the other side's
// close is the answer.
func (c Config) prepare(conn *websocket.Conn, stop <-chan struct{}) {
	extend := func() { _ = conn.SetReadDeadline(time.Now().Add(3 * c.PingInterval)) }
	extend()
	conn.SetPongHandler(func(string) error { extend(); return nil })
	conn.SetCloseHandler(func(int, string) error { return nil })
	go func() {
		t := time.NewTicker(c.PingInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if err := conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.PingInterval)); err != nil {
					return
				}
			}
		}
	}()
}

// pipe copies src's messages to dst until src ends; then it passes the end on to dst as a close
// with src's code (a read error that is not a close becomes 1011, a timeout 1001), and returns
// that code.
func (c Config) pipe(dst, src *websocket.Conn, direction string) int {
	for {
		typ, r, err := src.NextReader()
		if err != nil {
			code, text := closeOf(err)
			_ = dst.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(c.CloseGrace))
			return code
		}
		_ = src.SetReadDeadline(time.Now().Add(3 * c.PingInterval))
		w, err := dst.NextWriter(typ)
		if err != nil {
			return websocket.CloseAbnormalClosure
		}
		n, err := io.Copy(w, r)
		c.Count(direction, int(n))
		if err != nil {
			_ = w.Close()
			return websocket.CloseAbnormalClosure
		}
		if err := w.Close(); err != nil {
			return websocket.CloseAbnormalClosure
		}
	}
}

// closeOf is the close to pass on for a read error.
func closeOf(err error) (int, string) {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		switch ce.Code {
		case websocket.CloseNoStatusReceived:
			return websocket.CloseNormalClosure, ""
		case websocket.CloseAbnormalClosure, websocket.CloseTLSHandshake:
			return websocket.CloseInternalServerErr, "the other side went away"
		}
		return ce.Code, ce.Text
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return websocket.CloseGoingAway, "no answer to keep-alive pings"
	}
	return websocket.CloseInternalServerErr, "the other side went away"
}
