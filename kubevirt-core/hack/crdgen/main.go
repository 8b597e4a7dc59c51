// Command crdgen writes the kubevirt.io CRDs of kubevirt-core, generated from kubevirt.io/api.
// Run it from the kubevirt-core module (it asks the go command where the type sources are):
//
//	go run ./hack/crdgen -out crds/kubevirt.io
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/d8virt/kubevirt-core/hack/crdgen/gen"
)

func main() {
	out := flag.String("out", "crds/kubevirt.io", "directory to write one YAML file per CRD into")
	flag.Parse()
	if err := gen.Write(*out); err != nil {
		fmt.Fprintf(os.Stderr, "crdgen: %v\n", err)
		os.Exit(1)
	}
}
