package guesttest

import "regexp"

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
