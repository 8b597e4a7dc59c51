// Command virtualization-controller reconciles the virtualization.deckhouse.io kinds onto the internal KubeVirt core.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "virtualization-controller: reconciles the virtualization.deckhouse.io kinds onto the internal KubeVirt core\n\nUsage: virtualization-controller [flags]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	fmt.Fprintln(os.Stderr, "virtualization-controller: not implemented yet")
	os.Exit(2)
}
