// Command local-provisioner is the local stack's dynamic provisioner (see package provisioner):
// it makes the default StorageClass, provisions each claim of it as a sparse file under
// --volumes-dir (an ext4 in a loop mount for Filesystem claims, the loop device for Block
// claims), grows volumes whose claims grow, and deletes released ones. `devcluster up` runs it.
//
//	local-provisioner --kubeconfig FILE --volumes-dir DIR [--storage-class local] [--log-level info]
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	"github.com/d8virt/devstack/provisioner"
	"github.com/d8virt/devstack/provisioner/hostvol"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "local-provisioner:", err)
		os.Exit(1)
	}
}

func run() error {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the stack (required)")
	dir := flag.String("volumes-dir", "", "where the volumes' files, mounts and device links live (required)")
	class := flag.String("storage-class", provisioner.ClassName, "name of the default StorageClass to create")
	logLevel := flag.String("log-level", "info", "debug, info, warn or error")
	flag.Parse()
	if *kubeconfig == "" || *dir == "" {
		flag.Usage()
		return fmt.Errorf("--kubeconfig and --volumes-dir are required")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	klog.SetLogger(logr.FromSlogHandler(log.Handler()))

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("load %s: %w", *kubeconfig, err)
	}
	cfg.UserAgent = "d8v-local-provisioner"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	store, err := hostvol.New(*dir, hostvol.Exec{})
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()

	pvs, err := kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list volumes: %w", err)
	}
	if err := provisioner.Recover(ctx, store, pvs.Items, log); err != nil {
		return err
	}
	if err := provisioner.EnsureStorageClass(ctx, kube, provisioner.StorageClass(*class)); err != nil {
		return err
	}

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	events := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "local-resizer"})

	factory := informers.NewSharedInformerFactory(kube, 10*time.Minute)
	resizer, err := provisioner.NewResizer(kube, factory, store, events, log, time.Now)
	if err != nil {
		return err
	}
	pc := controller.NewProvisionController(ctx, kube, provisioner.Name, provisioner.New(store, log),
		controller.LeaderElection(false),
		controller.ClaimsInformer(factory.Core().V1().PersistentVolumeClaims().Informer()),
		controller.VolumesInformer(factory.Core().V1().PersistentVolumes().Informer()),
	)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	log.Info("local provisioner running", "provisioner", provisioner.Name, "storageClass", *class, "volumes", store.Dir())
	go resizer.Run(ctx)
	pc.Run(ctx)
	factory.Shutdown()
	return nil
}
