package guesttest

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// PingServerPort is where PingServer listens in the guest.
const PingServerPort = 4242

// PingServer is a shell command line for the tiny guest's console that starts a TCP server on
// PingServerPort in the background: busybox nc runs a small shell for every connection, which
// greets with PingGreeting and answers each line l with "pong:l".
const PingServer = `printf '%s\n' '#!/bin/sh' 'echo hello-from-guest' 'while read l; do echo "pong:$l"; done' >/tmp/pf.sh; ` +
	`chmod +x /tmp/pf.sh; (nc -ll -p 4242 -e /tmp/pf.sh </dev/null >/dev/null 2>&1 &)`

// PingGreeting is the first line of a PingServer connection.
var PingGreeting = regexp.MustCompile(`hello-from-guest\n`)

// Pong matches PingServer's answer to line.
func Pong(line string) *regexp.Regexp {
	return regexp.MustCompile(`pong:` + regexp.QuoteMeta(line) + `\n`)
}

// PingLines are what a test sends a PingServer: a short line and one longer than a usual
// stream read.
var PingLines = []string{"ping-1", strings.Repeat("x", 3000)}

// Ping sends each of PingLines on c, a connection to a PingServer, and waits for its answer.
func Ping(c *Console, timeout time.Duration) error {
	for _, line := range PingLines {
		if err := c.Write(line + "\n"); err != nil {
			return err
		}
		if _, err := c.WaitFor(Pong(line), timeout); err != nil {
			return fmt.Errorf("%w\nso far:\n%s", err, c)
		}
	}
	return nil
}
