// Package launcherconn keeps virt-handler's connections to the launchers on its node: one gRPC
// client per launcher Pod, with a watch that remembers the domain's latest status and tells the
// handler's controller each time it changes.
package launcherconn

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// ErrNoSocket means the launcher has not opened its command socket yet.
var ErrNoSocket = errors.New("launcher command socket not there yet")

// Notify tells the controller that the VMI's domain status changed.
type Notify func(vmi types.NamespacedName)

// Manager owns the connections. The zero value is not usable; use New.
type Manager struct {
	notify Notify
	log    *slog.Logger
	// retry is the pause before a broken watch is re-opened.
	retry time.Duration

	mu    sync.Mutex
	conns map[types.UID]*conn
}

type conn struct {
	client *launcherapi.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	latest *launcherapi.DomainStatus
	// once holds the keys Once was asked about on this connection.
	once map[string]bool
}

// New returns a Manager that calls notify after every status change.
func New(notify Notify, log *slog.Logger) *Manager {
	return &Manager{notify: notify, log: log, retry: 500 * time.Millisecond, conns: map[types.UID]*conn{}}
}

// Ensure returns the client of the launcher in Pod podUID, connecting to socket and starting its
// watch the first time. It fails with ErrNoSocket while the launcher is still starting.
func (m *Manager) Ensure(podUID types.UID, vmi types.NamespacedName, socket string) (*launcherapi.Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.conns[podUID]; ok {
		return c.client, nil
	}
	if _, err := os.Stat(socket); errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoSocket
	} else if err != nil {
		return nil, fmt.Errorf("launcher socket %s: %w", socket, err)
	}
	client, err := launcherapi.Dial(socket)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{client: client, cancel: cancel, done: make(chan struct{})}
	m.conns[podUID] = c
	go m.watch(ctx, c, podUID, vmi, socket)
	return client, nil
}

// Client is the connection to the launcher in Pod podUID, nil when there is none: unlike Ensure,
// it never connects.
func (m *Manager) Client(podUID types.UID) *launcherapi.Client {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.conns[podUID]; ok {
		return c.client
	}
	return nil
}

// Latest is the last status the launcher in Pod podUID reported, nil if none yet. After the
// launcher exits it keeps the final one, which tells how the guest ended.
func (m *Manager) Latest(podUID types.UID) *launcherapi.DomainStatus {
	m.mu.Lock()
	c := m.conns[podUID]
	m.mu.Unlock()
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.latest
}

// Once reports whether key is asked about for the first time on the connection to the launcher
// in Pod podUID, so that what the handler does again and again (a command repeated while the
// launcher's status lags) can be told once. The memory goes with the connection; without one it
// reports false.
func (m *Manager) Once(podUID types.UID, key string) bool {
	m.mu.Lock()
	c := m.conns[podUID]
	m.mu.Unlock()
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.once[key] {
		return false
	}
	if c.once == nil {
		c.once = map[string]bool{}
	}
	c.once[key] = true
	return true
}

// Close drops the connection to the launcher in Pod podUID, if any.
func (m *Manager) Close(podUID types.UID) {
	m.mu.Lock()
	c := m.conns[podUID]
	delete(m.conns, podUID)
	m.mu.Unlock()
	if c != nil {
		c.cancel()
		<-c.done
		_ = c.client.Close()
	}
}

// watch follows the launcher's status until Close, re-opening the stream when it breaks (the
// launcher restarting its server, a timeout). A launcher that exited keeps failing to answer and
// its last status stays, until its Pod's volumes, and with them the socket, are removed: then
// nobody can ask about it any more and the connection drops itself.
func (m *Manager) watch(ctx context.Context, c *conn, podUID types.UID, vmi types.NamespacedName, socket string) {
	defer close(c.done)
	for ctx.Err() == nil {
		if _, err := os.Stat(socket); errors.Is(err, fs.ErrNotExist) {
			m.mu.Lock()
			if m.conns[podUID] == c {
				delete(m.conns, podUID)
			}
			m.mu.Unlock()
			_ = c.client.Close()
			return
		}
		stream, err := c.client.Watch(ctx)
		if err == nil {
			for {
				st, rerr := stream.Recv()
				if rerr != nil {
					err = rerr
					break
				}
				c.mu.Lock()
				c.latest = st
				c.mu.Unlock()
				m.notify(vmi)
			}
		}
		if ctx.Err() != nil {
			return
		}
		m.log.Debug("launcher watch ended; retrying", "vmi", vmi, "err", err)
		// Wake the controller: a broken stream may mean the launcher exited, which the Pod's
		// status will confirm.
		m.notify(vmi)
		select {
		case <-ctx.Done():
			return
		case <-time.After(m.retry):
		}
	}
}
