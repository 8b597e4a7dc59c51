// Command service-proxy gives the local stack's pods and host what kube-proxy and CoreDNS give a
// cluster's: every TCP port of every Service on its cluster IP (package svcproxy) and the cluster
// DNS on the address of kube-system/kube-dns (package clusterdns), from Services and
// EndpointSlices (package servicetable). `devcluster up` runs one per stack.
//
//	service-proxy --kubeconfig FILE --service-cidr CIDR --cluster-dns IP [--cluster-domain cluster.local]
//	              [--resolv-conf /etc/resolv.conf] [--log-level info]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/d8virt/devstack/clusterdns"
	"github.com/d8virt/devstack/servicetable"
	"github.com/d8virt/devstack/svcproxy"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "service-proxy:", err)
		os.Exit(1)
	}
}

func run() error {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the stack (required)")
	cidrFlag := flag.String("service-cidr", "", "the stack's Service range, made local to this machine (required)")
	dnsFlag := flag.String("cluster-dns", "", "address of the cluster DNS, in the Service range (required)")
	domain := flag.String("cluster-domain", "cluster.local", "the cluster's DNS domain")
	nodeFlag := flag.String("node-address", "", "the nodes' address, where NodePort Services are served too (none when empty)")
	resolvConf := flag.String("resolv-conf", "/etc/resolv.conf", "where the upstream resolvers for other names are")
	logLevel := flag.String("log-level", "info", "debug, info, warn or error")
	flag.Parse()
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if *kubeconfig == "" {
		return errors.New("--kubeconfig is required")
	}
	cidr, err := netip.ParsePrefix(*cidrFlag)
	if err != nil {
		return fmt.Errorf("--service-cidr: %w", err)
	}
	dnsIP, err := netip.ParseAddr(*dnsFlag)
	if err != nil {
		return fmt.Errorf("--cluster-dns: %w", err)
	}
	if !cidr.Contains(dnsIP) {
		return fmt.Errorf("--cluster-dns %s is outside --service-cidr %s", dnsIP, cidr)
	}
	var node netip.Addr
	if *nodeFlag != "" {
		if node, err = netip.ParseAddr(*nodeFlag); err != nil {
			return fmt.Errorf("--node-address: %w", err)
		}
	}
	upstreams, err := upstreamResolvers(*resolvConf)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("load %s: %w", *kubeconfig, err)
	}
	cfg.UserAgent = "d8v-service-proxy"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()

	if err := svcproxy.AddLocalRoute(cidr); err != nil {
		return err
	}
	defer func() {
		if err := svcproxy.DeleteLocalRoute(cidr); err != nil {
			log.Warn("remove local route", "cidr", cidr, "err", err)
		}
	}()
	if err := ensureDNSService(ctx, kube, dnsIP); err != nil {
		return err
	}

	resolver := clusterdns.NewServer(*domain, upstreams, &dns.Client{Timeout: 3 * time.Second}, log)
	dnsAddr := netip.AddrPortFrom(dnsIP, 53).String()
	servers := []*dns.Server{{Addr: dnsAddr, Net: "udp", Handler: resolver}, {Addr: dnsAddr, Net: "tcp", Handler: resolver}}
	errc := make(chan error, len(servers))
	for _, srv := range servers {
		go func() { errc <- fmt.Errorf("dns %s/%s: %w", srv.Addr, srv.Net, srv.ListenAndServe()) }()
	}
	defer func() {
		for _, srv := range servers {
			_ = srv.Shutdown()
		}
	}()

	proxy := svcproxy.New(log, svcproxy.TCPListen, svcproxy.TCPDial, 2*time.Second)
	defer proxy.Close()

	factory := informers.NewSharedInformerFactory(kube, 10*time.Minute)
	svcLister := factory.Core().V1().Services().Lister()
	sliceLister := factory.Discovery().V1().EndpointSlices().Lister()
	changed := make(chan struct{}, 1)
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke(changed) },
		UpdateFunc: func(any, any) { poke(changed) },
		DeleteFunc: func(any) { poke(changed) },
	}
	for _, inf := range []cache.SharedIndexInformer{factory.Core().V1().Services().Informer(), factory.Discovery().V1().EndpointSlices().Informer()} {
		if _, err := inf.AddEventHandler(notify); err != nil {
			return err
		}
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), factory.Core().V1().Services().Informer().HasSynced, factory.Discovery().V1().EndpointSlices().Informer().HasSynced) {
		return ctx.Err()
	}
	log.Info("service proxy running", "serviceCIDR", cidr, "clusterDNS", dnsAddr, "domain", *domain, "upstreams", upstreams)

	retry := time.NewTimer(time.Hour)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return err
		case <-changed:
		case <-retry.C:
		}
		svcs, err := svcLister.List(labels.Everything())
		if err != nil {
			return err
		}
		slices, err := sliceLister.List(labels.Everything())
		if err != nil {
			return err
		}
		table := servicetable.Build(svcs, slices)
		resolver.Update(table)
		want, skipped := svcproxy.Frontends(table, node)
		// The DNS address is served by the resolver itself.
		delete(want, netip.AddrPortFrom(dnsIP, 53))
		for fe := range want {
			if !cidr.Contains(fe.Addr()) && fe.Addr() != node {
				log.Warn("cluster IP outside the service CIDR, not served (a stack made before its range changed: down -purge it)", "frontend", fe)
				delete(want, fe)
			}
		}
		if len(skipped) > 0 {
			log.Debug("service ports not served (TCP only)", "ports", skipped)
		}
		if err := proxy.Sync(want); err != nil {
			log.Warn("sync service ports", "err", err)
			retry.Reset(time.Second)
		}
	}
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// upstreamResolvers are the nameservers of the host's resolv.conf as host:port.
func upstreamResolvers(path string) ([]string, error) {
	rc, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("read upstream resolvers: %w", err)
	}
	var out []string
	for _, s := range rc.Servers {
		out = append(out, net.JoinHostPort(s, rc.Port))
	}
	return out, nil
}

// DNSServiceName is the Service that holds the cluster DNS address, so the apiserver never gives
// it to another Service, and `kubectl get svc -n kube-system` shows it as on a cluster.
const DNSServiceName = "kube-dns"

func ensureDNSService(ctx context.Context, kube kubernetes.Interface, ip netip.Addr) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: DNSServiceName, Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}},
		Spec: corev1.ServiceSpec{ClusterIP: ip.String(), Ports: []corev1.ServicePort{
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
			{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
		}},
	}
	cur, err := kube.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = kube.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create service kube-system/%s with cluster IP %s (a stack made before each stack had a Service range of its own refuses it: devcluster down -purge it once): %w", DNSServiceName, ip, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("get service kube-system/%s: %w", DNSServiceName, err)
	case cur.Spec.ClusterIP != ip.String():
		return fmt.Errorf("service kube-system/%s has cluster IP %s, not %s (a stack made with another service range: down -purge it)", DNSServiceName, cur.Spec.ClusterIP, ip)
	}
	return nil
}
