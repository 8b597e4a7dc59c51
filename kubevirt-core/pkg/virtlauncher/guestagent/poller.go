package guestagent

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirt"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// Commander runs one guest agent command and returns the agent's JSON answer; *libvirt.Domain is
// one.
type Commander interface {
	QemuAgentCommand(command string, timeout libvirt.DomainQemuAgentCommandTimeout, flags uint32) (string, error)
}

// Snapshot is what the agent last told. It is the zero value while no agent is connected.
type Snapshot struct {
	Info       kubevirtv1.VirtualMachineInstanceGuestAgentInfo
	Interfaces []launcherapi.GuestInterface
}

const (
	// Interval is how often KubeVirt's launcher asks the agent about the guest.
	Interval = 10 * time.Second
	// retryInterval follows a round with failed commands in the first rounds after the agent
	// connected: qemu-ga may open its port a moment before it answers everything.
	retryInterval = 2 * time.Second
	retryRounds   = 5
	// commandTimeout bounds each command (seconds): a hung agent must not stall the poller long.
	commandTimeout libvirt.DomainQemuAgentCommandTimeout = 5
)

// Poller asks the agent every Interval while it is connected, and right away when kicked (on
// connect and disconnect). Each changed Snapshot is followed by a call of onChange.
type Poller struct {
	agent     Commander
	connected func() bool
	onChange  func()
	log       *slog.Logger
	kick      chan struct{}

	mu   sync.Mutex
	last Snapshot
}

// New returns a poller of agent; connected tells whether libvirt sees the agent's channel
// connected.
func New(agent Commander, connected func() bool, onChange func(), log *slog.Logger) *Poller {
	if log == nil {
		log = slog.Default()
	}
	return &Poller{agent: agent, connected: connected, onChange: onChange, log: log, kick: make(chan struct{}, 1)}
}

// Kick makes the poller ask (or forget) now: the agent connected or went away.
func (p *Poller) Kick() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Last is the latest Snapshot. Its slices are shared: read them, do not change them.
func (p *Poller) Last() Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// Run polls until quit is closed, and returns once no command runs any more.
func (p *Poller) Run(quit <-chan struct{}) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	rounds := 0 // since the agent connected
	for {
		select {
		case <-quit:
			return
		case <-timer.C:
		case <-p.kick:
		}
		next := Interval
		if !p.connected() {
			rounds = 0
			p.set(Snapshot{})
		} else {
			s, err := read(p.agent, quit, p.Last())
			rounds++
			if err != nil {
				p.log.Debug("guest agent", "err", err)
				if rounds < retryRounds {
					next = retryInterval
				}
			}
			p.set(s)
		}
		timer.Reset(next)
	}
}

func (p *Poller) set(s Snapshot) {
	p.mu.Lock()
	changed := !reflect.DeepEqual(s, p.last)
	p.last = s
	p.mu.Unlock()
	if changed {
		p.onChange()
	}
}

// read runs every command once, or until quit is closed, starting from the previous snapshot: a
// command that fails keeps what it told last time (a paused guest's agent answers nothing), as
// KubeVirt's store does; the others still count.
func read(agent Commander, quit <-chan struct{}, prev Snapshot) (Snapshot, error) {
	s := prev
	var errs []error
	run := func(cmd string, parse func(answer string) error) {
		select {
		case <-quit:
			return
		default:
		}
		answer, err := agent.QemuAgentCommand(`{"execute":"`+cmd+`"}`, commandTimeout, 0)
		if err == nil {
			err = parse(answer)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", cmd, err))
		}
	}
	info := &s.Info
	run(cmdInfo, func(a string) error {
		version, cmds, err := parseInfo(a)
		if err == nil {
			info.GAVersion, info.SupportedCommands = version, cmds
		}
		return err
	})
	run(cmdOSInfo, into(&info.OS, parseOSInfo))
	run(cmdHostName, into(&info.Hostname, parseHostName))
	run(cmdTimezone, into(&info.Timezone, parseTimezone))
	run(cmdUsers, into(&info.UserList, parseUsers))
	run(cmdFSInfo, into(&info.FSInfo.Filesystems, parseFSInfo))
	run(cmdInterfaces, into(&s.Interfaces, parseInterfaces))
	return s, errors.Join(errs...)
}

// into parses an answer into *dst, leaving it alone when the answer does not parse.
func into[T any](dst *T, parse func(string) (T, error)) func(string) error {
	return func(answer string) error {
		v, err := parse(answer)
		if err == nil {
			*dst = v
		}
		return err
	}
}
