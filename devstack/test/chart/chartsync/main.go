// Command chartsync writes the files of charts/virtualization that come from elsewhere in the
// repository (see package chartsrc). Run it from the repository root: `make chart-sync`.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/d8virt/devstack/test/chart/chartsrc"
)

func main() {
	root := flag.String("root", ".", "the repository root")
	flag.Parse()
	if err := chartsrc.Write(*root); err != nil {
		fmt.Fprintln(os.Stderr, "chartsync:", err)
		os.Exit(1)
	}
}
