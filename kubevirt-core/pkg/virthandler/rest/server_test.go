package rest

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/d8virt/kubevirt-core/pkg/corescheme"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/launcherpod"
	"github.com/d8virt/kubevirt-core/pkg/wsrelay"
)

// testServer serves a handler on node n1 with one running VMI whose launcher Pod has the IP
// 127.0.0.1, so the guest's ports are the test's own listeners.
func testServer(t *testing.T) (*httptest.Server, *kubevirtv1.VirtualMachineInstance, *corev1.Pod, string) {
	t.Helper()
	scheme, err := corescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	v := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "vmi-uid"},
		Status:     kubevirtv1.VirtualMachineInstanceStatus{NodeName: "n1", Phase: kubevirtv1.Running},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "virt-launcher-vm-x", UID: "pod-uid",
			Labels:          launcherpod.Labels(v.UID),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(v, kubevirtv1.VirtualMachineInstanceGroupVersionKind)},
		},
		Spec:   corev1.PodSpec{NodeName: "n1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1"},
	}
	podsDir := t.TempDir()
	s := &Server{
		Client:   fake.NewClientBuilder().WithScheme(scheme).WithObjects(v, pod).Build(),
		NodeName: "n1", PodsDir: podsDir, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv, v, pod, podsDir
}

func dial(t *testing.T, srv *httptest.Server, sub string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{wsrelay.PlainSubprotocol}}
	return d.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/namespaces/ns/virtualmachineinstances/vm/"+sub, nil)
}

func roundTrip(t *testing.T, ws *websocket.Conn, msg string) string {
	t.Helper()
	if err := ws.WriteMessage(websocket.BinaryMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, b, err := ws.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// lineEcho answers each line with "echo:<line>" on every connection to l.
func lineEcho(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				if _, err := c.Write([]byte("echo:" + sc.Text() + "\n")); err != nil {
					return
				}
			}
		}()
	}
}

func TestPortForward(t *testing.T) {
	srv, _, _, _ := testServer(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go lineEcho(l)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)

	// Forwards run side by side: a second one does not end the first.
	a, _, err := dial(t, srv, "portforward/"+port)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, _, err := dial(t, srv, "portforward/"+port+"/tcp")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, ws := range []*websocket.Conn{a, b, a} {
		if got := roundTrip(t, ws, "hi\n"); got != "echo:hi\n" {
			t.Errorf("forward answered %q", got)
		}
	}

	for _, tc := range []struct {
		sub  string
		code int
	}{
		{"portforward/" + port + "/sctp", http.StatusBadRequest},
		{"portforward/0", http.StatusBadRequest},
		{"portforward/1", http.StatusInternalServerError}, // nothing listens there
	} {
		if _, resp, err := dial(t, srv, tc.sub); err == nil || resp == nil || resp.StatusCode != tc.code {
			t.Errorf("%s: %v (response %v), want %d", tc.sub, err, resp, tc.code)
		}
	}
}

func TestConsoleSessionIsExclusive(t *testing.T) {
	srv, v, pod, podsDir := testServer(t)
	dir := filepath.Join(launcherapi.PodVolumeDir(podsDir, string(pod.UID), launcherapi.PrivateVolume), string(v.UID))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The path is longer than a socket address may be, as on a node; bound relative to it.
	t.Chdir(dir)
	l, err := net.Listen("unix", launcherapi.SerialSocketName)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go lineEcho(l)

	first, _, err := dial(t, srv, "console")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if got := roundTrip(t, first, "one\n"); got != "echo:one\n" {
		t.Fatalf("console answered %q", got)
	}
	second, _, err := dial(t, srv, "console")
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	// The newer session ends the older one, and keeps working once the older one is gone.
	if !ended(first) {
		t.Error("the first console session still runs")
	}
	time.Sleep(100 * time.Millisecond)
	if got := roundTrip(t, second, "two\n"); got != "echo:two\n" {
		t.Errorf("console answered %q", got)
	}
	third, _, err := dial(t, srv, "console")
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if !ended(second) {
		t.Error("the second console session still runs after a third opened")
	}
}

// ended tells whether the server closed ws, rather than it just staying silent.
func ended(ws *websocket.Conn) bool {
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err := ws.ReadMessage()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}
