// Command virtualization-api serves the subresources of the virtualization.deckhouse.io kinds.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "virtualization-api: serves the subresources of the virtualization.deckhouse.io kinds\n\nUsage: virtualization-api [flags]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	fmt.Fprintln(os.Stderr, "virtualization-api: not implemented yet")
	os.Exit(2)
}
