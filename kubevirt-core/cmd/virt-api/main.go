// Command virt-api serves the core's admission webhooks and the subresources.kubevirt.io API.
package main

import "github.com/d8virt/kubevirt-core/internal/scaffold"

func main() {
	scaffold.Main("virt-api", "serves the core's admission webhooks and the subresources.kubevirt.io API")
}
