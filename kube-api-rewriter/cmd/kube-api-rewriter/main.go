// Command kube-api-rewriter is the sidecar that lets KubeVirt-speaking components run against a
// cluster where the KubeVirt API exists only under renamed groups and kinds.
//
//	kube-api-rewriter [flags]                    run the proxy (api, webhook, metrics and health listeners)
//	kube-api-rewriter rename-crds FILE|- ...      print the renamed CRDs of KubeVirt-group CRD YAMLs
//
// Every flag can also be set through the environment: --api-listen is KUBE_API_REWRITER_API_LISTEN.
// The command lives in package app.
package main

import (
	"os"

	"github.com/d8virt/kube-api-rewriter/pkg/app"
)

func main() { os.Exit(app.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
