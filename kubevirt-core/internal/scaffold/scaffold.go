// Package scaffold gives the core's binaries a common command line until each grows its own, so
// that `make build` produces every binary the chart and the local stack will run.
package scaffold

import (
	"flag"
	"fmt"
	"os"
)

// Main parses the flags of a binary that has no behaviour yet and exits with status 2 when run,
// so that a deployment that starts it fails loudly instead of looking healthy.
func Main(name, about string) {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s: %s\n\nUsage: %s [flags]\n", name, about, name)
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:])
	fmt.Fprintf(os.Stderr, "%s: not implemented yet\n", name)
	os.Exit(2)
}
