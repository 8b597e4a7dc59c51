package core

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/nodeagent"
	"github.com/d8virt/kubevirt-core/pkg/virtoperator"
)

// TestHandlerObjectsAreTheOperators: the local stack's virt-handler is the operator's, with the
// stack's images and settings, certificates from the stack's CA, and no administrator.
func TestHandlerObjectsAreTheOperators(t *testing.T) {
	s, err := controlplane.New(controlplane.Config{StateDir: t.TempDir(), BinDir: "unused", PortBase: 30000})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := handlerObjects(s)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(s.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	var ds *appsv1.DaemonSet
	secrets := map[string]*corev1.Secret{}
	reader := false
	for _, o := range objs {
		switch x := o.(type) {
		case *rbacv1.ClusterRole:
			reader = reader || x.Name == virtoperator.MetricsReaderRole
		case *appsv1.DaemonSet:
			ds = x
		case *corev1.Secret:
			secrets[x.Name] = x
		case *rbacv1.ClusterRoleBinding:
			if x.RoleRef.Name == "cluster-admin" {
				t.Errorf("%s binds cluster-admin", x.Name)
			}
		}
		if o.GetNamespace() != "" && o.GetNamespace() != Namespace {
			t.Errorf("%s in namespace %s", o.GetName(), o.GetNamespace())
		}
	}
	if ds == nil {
		t.Fatal("no DaemonSet")
	}
	if !reader {
		t.Error("no metrics reader role for a scraper to be bound to")
	}
	spec := ds.Spec.Template.Spec
	want := virtoperator.Install{Namespace: Namespace, Images: handlerInstall().Images, Emulation: true}.HandlerDaemonSet(virtoperator.Certs{})
	var names []string
	for i, c := range spec.Containers {
		names = append(names, c.Name)
		// Every program is found as the node agent finds an image's.
		if _, _, err := resolvable(c); err != nil {
			t.Errorf("container %s: %v", c.Name, err)
		}
		if i < len(want.Spec.Template.Spec.Containers) && c.Image != want.Spec.Template.Spec.Containers[i].Image {
			t.Errorf("container %s image %s", c.Name, c.Image)
		}
	}
	if !slices.Equal(names, []string{"virt-handler", virtoperator.RewriterName, virtoperator.KubeRBACProxyName, virtoperator.RewriterMetricsProxyName}) {
		t.Errorf("containers %v", names)
	}
	for _, a := range append([]string{"--metrics-bind-address=127.0.0.1:8080"}, handlerArgs...) {
		if !slices.Contains(spec.Containers[0].Args, a) {
			t.Errorf("handler args %v lack %s", spec.Containers[0].Args, a)
		}
	}
	if !slices.Contains(spec.InitContainers[0].Args, "--emulation") {
		t.Errorf("node labeller args %v", spec.InitContainers[0].Args)
	}
	for name, dns := range map[string]string{
		virtoperator.HandlerServerCertSecret:  "virt-handler",
		virtoperator.HandlerMetricsCertSecret: "virt-handler-metrics.kubevirt.svc",
	} {
		sec := secrets[name]
		if sec == nil {
			t.Errorf("no Secret %s", name)
			continue
		}
		b, _ := pem.Decode(sec.Data[corev1.TLSCertKey])
		if b == nil {
			t.Errorf("%s holds no certificate", name)
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: dns}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if string(sec.Data["ca.crt"]) != string(ca) {
			t.Errorf("%s trusts another CA", name)
		}
	}
}

// resolvable resolves a container's program against a bin directory that holds every image's.
func resolvable(c corev1.Container) (string, []string, error) {
	dir, err := os.MkdirTemp("", "bin")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(dir)
	for _, b := range []string{"virt-handler", "kube-api-rewriter", "virt-launcher", "kube-rbac-proxy"} {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			return "", nil, err
		}
	}
	p, argv, err := nodeagent.ResolveExecutable(dir, c.Image, c.Command, c.Args)
	if err == nil && filepath.Dir(p) != dir {
		err = fmt.Errorf("runs %s, not an image's program", p)
	}
	return p, argv, err
}
