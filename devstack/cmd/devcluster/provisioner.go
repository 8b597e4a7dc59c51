package main

import (
	"path/filepath"

	"github.com/d8virt/devstack/provisioner"
)

// defaultProvisionerBinary is local-provisioner in binDir, made absolute: where a provisioner that
// does not run starts from.
func defaultProvisionerBinary(binDir string) (string, error) {
	abs, err := filepath.Abs(binDir)
	if err != nil {
		return "", err
	}
	return filepath.Join(abs, provisioner.Daemon), nil
}
