package main

import "path/filepath"

// daemonBinary is the program of a stack daemon (local-provisioner, service-proxy) in binDir,
// made absolute: where such a daemon that does not run starts from.
func daemonBinary(binDir, name string) (string, error) {
	abs, err := filepath.Abs(binDir)
	if err != nil {
		return "", err
	}
	return filepath.Join(abs, name), nil
}
