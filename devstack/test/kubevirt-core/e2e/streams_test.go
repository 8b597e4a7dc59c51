package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/friendlyvm"
	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/console"
)

const (
	// streamsSourcePort is where the guest of BenchmarkStreams sends streamsBytes to each
	// connection, and closes it.
	streamsSourcePort = 4343
	streamsBytes      = 8 << 20
	streamsRounds     = 5
	// streamsEchoes is how many typed characters one console round measures.
	streamsEchoes = 100
)

// streamsUserData starts the guest's source server at boot: busybox nc runs, for each
// connection, a shell that writes streamsBytes zeros.
var streamsUserData = `#!/bin/sh
printf '%s\n' '#!/bin/sh' 'head -c ` + strconv.Itoa(streamsBytes) + ` /dev/zero' >/run/source.sh
chmod +x /run/source.sh
(nc -ll -p ` + strconv.Itoa(streamsSourcePort) + ` -e /run/source.sh </dev/null >/dev/null 2>&1 &)
`

// BenchmarkStreams measures virtualization-api's streams next to the paths it stands in front
// of, in one run on one friendly VM of the tiny guest: the throughput of a port-forward through
// virtualization-api, through the core's virt-api, and straight to the launcher Pod's address;
// and the round trip of the serial console (a typed character until its echo) through
// virtualization-api and through the core's virt-api (TARGET: p50 at most 1 ms more). The
// paths take turns, so that the load of the machine falls on all alike. Run it with
// `make bench-streams`.
func BenchmarkStreams(b *testing.B) {
	c := startCluster(b)
	admin, err := c.stack.RESTConfig()
	if err != nil {
		b.Fatal(err)
	}
	friendly, err := client.New(admin, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	const ns, name = "streams", "streams"
	spec := friendlyvm.Spec{Name: name, Namespace: ns, Class: "streams", Image: "streams-guest",
		RunPolicy: "AlwaysOn", Cores: 1, CoreFraction: "100%", Memory: "128Mi", UserData: streamsUserData}
	g := friendlyvm.ServeGuestFiles(b, ctx)
	kubectl := func(args ...string) string {
		b.Helper()
		out, err := testenv.KubectlInput(b, c.stack.KubeconfigPath(), "", args...)
		if err != nil {
			b.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return out
	}
	kubectl("create", "namespace", ns)
	createYAML(b, ctx, friendly, friendlyvm.ImageYAML(spec.Image, g.HTTPSource("disk.qcow2", g.SHA256("disk.qcow2"))))
	createYAML(b, ctx, friendly, spec.ClassYAML())
	b.Cleanup(func() {
		for _, what := range []string{"namespace/" + ns, "vmclass/" + spec.Class, "cvi/" + spec.Image} {
			_, _ = testenv.KubectlInput(b, c.stack.KubeconfigPath(), "", "delete", what, "--ignore-not-found", "--timeout=3m")
		}
	})
	kubectl("wait", "cvi/"+spec.Image, "--for=jsonpath={.status.phase}=Ready", "--timeout=5m")
	createYAML(b, ctx, friendly, spec.MachineYAML())
	kubectl("-n", ns, "wait", "vm/"+name, "--for=jsonpath={.status.phase}=Running", "--timeout=5m")
	vm := &unstructured.Unstructured{}
	vm.SetAPIVersion("virtualization.deckhouse.io/v1alpha2")
	vm.SetKind("VirtualMachine")
	if err := friendly.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vm); err != nil {
		b.Fatal(err)
	}
	// The launcher Pod has the machine's address; its masquerade passes every port to the guest.
	ip, _, _ := unstructured.NestedString(vm.Object, "status", "ipAddress")
	if ip == "" {
		b.Fatalf("the VirtualMachine has no address: %v", vm.Object["status"])
	}

	vapi := "/apis/subresources.virtualization.deckhouse.io/v1alpha2/namespaces/" + ns + "/virtualmachines/" + name + "/"
	forwards := []streamPath{
		{"straight to the launcher Pod", func(ctx context.Context) (io.ReadWriteCloser, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(streamsSourcePort)))
		}},
		{"through the core's virt-api", func(ctx context.Context) (io.ReadWriteCloser, error) {
			return console.PortForward(ctx, c.rest, console.VMIs, ns, name, streamsSourcePort, "tcp")
		}},
		{"through virtualization-api", func(ctx context.Context) (io.ReadWriteCloser, error) {
			return dialStream(ctx, admin, vapi+"portforward/"+strconv.Itoa(streamsSourcePort)+"/tcp")
		}},
	}
	consoles := []streamPath{
		{"through the core's virt-api", func(ctx context.Context) (io.ReadWriteCloser, error) {
			return console.Open(ctx, c.rest, ns, name, "console")
		}},
		{"through virtualization-api", func(ctx context.Context) (io.ReadWriteCloser, error) {
			return dialStream(ctx, admin, vapi+"console")
		}},
	}

	// The guest's server is up once a straight connection brings the bytes.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if _, err := forwards[0].receive(ctx); err == nil {
			break
		} else if time.Now().After(deadline) {
			b.Fatalf("the guest's source server at %s:%d: %v", ip, streamsSourcePort, err)
		}
		time.Sleep(2 * time.Second)
	}

	for i := 0; i < b.N; i++ {
		took := make([][]time.Duration, len(forwards))
		for r := 0; r < streamsRounds; r++ {
			for k := range forwards {
				p := forwards[(k+r)%len(forwards)]
				d, err := p.receive(ctx)
				if err != nil {
					b.Fatalf("port-forward %s: %v", p.name, err)
				}
				took[(k+r)%len(forwards)] = append(took[(k+r)%len(forwards)], d)
			}
		}
		echoes := make([][]time.Duration, len(consoles))
		for r := 0; r < streamsRounds; r++ {
			for k := range consoles {
				j := (k + r) % len(consoles)
				rtts, err := consoles[j].echoes(ctx, streamsEchoes)
				if err != nil {
					b.Fatalf("console %s: %v", consoles[j].name, err)
				}
				echoes[j] = append(echoes[j], rtts...)
			}
		}

		mbps := func(k int) float64 { return float64(streamsBytes) / median(took[k]).Seconds() / (1 << 20) }
		direct, core, vapiRate := mbps(0), mbps(1), mbps(2)
		coreRTT, vapiRTT := median(echoes[0]), median(echoes[1])
		added := vapiRTT - coreRTT
		b.ReportMetric(direct, "pf-direct-MiB/s")
		b.ReportMetric(core, "pf-virt-api-MiB/s")
		b.ReportMetric(vapiRate, "pf-vapi-MiB/s")
		b.ReportMetric(float64(coreRTT.Microseconds())/1000, "console-virt-api-p50-ms")
		b.ReportMetric(float64(vapiRTT.Microseconds())/1000, "console-vapi-p50-ms")
		verdict := "met"
		if added > time.Millisecond {
			verdict = "NOT met"
		}
		b.Logf("port-forward of %d MiB from the guest, median of %d in turns:\n"+
			"  straight to the launcher Pod  %6.1f MiB/s\n"+
			"  through the core's virt-api   %6.1f MiB/s (%.2fx the straight one)\n"+
			"  through virtualization-api    %6.1f MiB/s (%.2fx the straight one, %.2fx the core's virt-api)\n"+
			"console round trip (a typed character until its echo), p50 of %d in turns:\n"+
			"  through the core's virt-api   %.2f ms (p95 %.2f ms)\n"+
			"  through virtualization-api    %.2f ms (p95 %.2f ms)\n"+
			"TARGET console round trip through virtualization-api at most 1 ms over the core's virt-api: %+.2f ms, %s",
			streamsBytes>>20, streamsRounds, direct, core, core/direct, vapiRate, vapiRate/direct, vapiRate/core,
			len(echoes[0]), ms(coreRTT), ms(percentile(echoes[0], 95)), ms(vapiRTT), ms(percentile(echoes[1], 95)), ms(added), verdict)
	}
}

// streamPath is one way to reach the guest's stream.
type streamPath struct {
	name string
	dial func(ctx context.Context) (io.ReadWriteCloser, error)
}

// receive connects to the guest's source server and reads its streamsBytes: the time from the
// dial to the last byte.
func (p streamPath) receive(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	conn, err := p.dial(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	n, err := io.CopyN(io.Discard, conn, streamsBytes)
	if err != nil {
		return 0, fmt.Errorf("after %d bytes: %w", n, err)
	}
	return time.Since(start), nil
}

// echoes opens the console, clears the shell's line, and types n characters one at a time,
// each once the previous one's echo came back: their round trips.
func (p streamPath) echoes(ctx context.Context, n int) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// The previous session's end may still be on its way through the proxies: a refusal is
	// tried again.
	var conn io.ReadWriteCloser
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		if conn, err = p.dial(ctx); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, err
		}
	}
	defer conn.Close()
	go func() { <-ctx.Done(); conn.Close() }()
	// Ctrl+U empties the shell's line; what the console sent before goes unread up to the echo
	// of a z.
	if _, err := conn.Write([]byte{0x15, 'z'}); err != nil {
		return nil, err
	}
	if err := readUntil(conn, 'z'); err != nil {
		return nil, fmt.Errorf("the first echo: %w", err)
	}
	rtts := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if _, err := conn.Write([]byte{'x'}); err != nil {
			return nil, err
		}
		if err := readUntil(conn, 'x'); err != nil {
			return nil, fmt.Errorf("echo %d: %w", i, err)
		}
		rtts = append(rtts, time.Since(start))
	}
	_, err = conn.Write([]byte{0x15, '\n'})
	return rtts, err
}

// readUntil reads until a read brings c.
func readUntil(conn io.Reader, c byte) error {
	buf := make([]byte, 4096)
	for {
		m, err := conn.Read(buf)
		if err != nil {
			return err
		}
		if bytes.IndexByte(buf[:m], c) >= 0 {
			return nil
		}
	}
}

// dialStream opens a WebSocket stream of another group's subresource (virtualization-api's) at
// path with the admin's credentials.
func dialStream(ctx context.Context, cfg *rest.Config, path string) (io.ReadWriteCloser, error) {
	target, err := console.StreamURL(cfg, path)
	if err != nil {
		return nil, err
	}
	return console.Dial(ctx, cfg, target, path)
}

func median(d []time.Duration) time.Duration { return percentile(d, 50) }

// percentile is the p-th percentile of d (nearest rank).
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, (len(s)*p+99)/100-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
