// Command virtualization-controller reconciles the virtualization.deckhouse.io kinds.
package main

import (
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/d8virt/virtualization-controller/pkg/app"
)

func main() {
	os.Exit(app.NewCommand().Run(ctrl.SetupSignalHandler(), os.Args[1:]))
}
