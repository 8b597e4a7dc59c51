// Command virtualization-api serves the subresources of the virtualization.deckhouse.io
// VirtualMachines (docs/virtualization-api.md).
package main

import (
	"os"

	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/d8virt/virtualization-api/app"
)

func main() {
	cmd := app.NewCommand()
	cmd.SetContext(genericapiserver.SetupSignalContext())
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}
