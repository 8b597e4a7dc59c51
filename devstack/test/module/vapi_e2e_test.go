package module

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	wstransport "k8s.io/client-go/transport/websocket"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/devstack/module"
)

// The group virtualization-api serves.
const (
	vapiGroup  = "subresources.virtualization.deckhouse.io"
	vapiPrefix = "/apis/" + vapiGroup + "/v1alpha2/namespaces/"
)

// checkVirtualizationAPI checks virtualization-api from the chart against the running friendly
// VM vm in default (checkVirtualMachine's, made by virtualization-controller):
// discovery lists the subresources; a user with only virtualmachines/console in default gets the
// guest's serial console through it, a second console is refused naming the holder (and the probe
// shows it), VNC, another namespace and a user without the right get 403, a missing VM 404.
func checkVirtualizationAPI(t *testing.T, ctx context.Context, st *stack, vm string) {
	t.Helper()
	admin := st.s.KubeconfigPath()
	t.Log("virtualization-api: kubectl api-resources and discovery list the subresources")
	res := st.kubectl(t, admin, "api-resources", "--api-group="+vapiGroup, "--no-headers")
	if !regexp.MustCompile(`(?m)^virtualmachines\s+` + regexp.QuoteMeta(vapiGroup+"/v1alpha2") + `\s+true\s+VirtualMachine$`).MatchString(res) {
		t.Errorf("kubectl api-resources --api-group=%s:\n%s", vapiGroup, res)
	}
	disc := st.kubectl(t, admin, "get", "--raw", "/apis/"+vapiGroup+"/v1alpha2")
	for _, sub := range []string{"console", "vnc", "portforward", "addvolume", "removevolume", "freeze", "unfreeze"} {
		if !strings.Contains(disc, `"name":"virtualmachines/`+sub+`"`) {
			t.Errorf("discovery lacks virtualmachines/%s: %s", sub, disc)
		}
	}

	tokens := consoleUsers(t, ctx, st)
	cfg, err := st.s.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	as := func(user string) *rest.Config {
		return &rest.Config{Host: cfg.Host, BearerToken: tokens[user], TLSClientConfig: rest.TLSClientConfig{CAFile: st.s.CAFile()}}
	}

	t.Log("virtualization-api: a user with only virtualmachines/console types into the guest's console")
	ws := openVAPI(t, ctx, as("console-user"), "default", vm, "console")
	con := guesttest.NewConsole(&wsConn{ws: ws})
	if err := con.Write("echo vapi-$((6*7))\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := con.WaitFor(regexp.MustCompile(`vapi-42`), 60*time.Second); err != nil {
		t.Fatalf("%v\nconsole so far:\n%s", err, con)
	}
	// A TCP server in the guest for the port-forward below.
	if err := con.Write(guesttest.PingServer + "; echo ping-server-$((6*7))\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := con.WaitFor(regexp.MustCompile(`ping-server-42`), 60*time.Second); err != nil {
		t.Fatalf("%v\nconsole so far:\n%s", err, con)
	}

	t.Log("virtualization-api: refusals while the console is open")
	holder := "system:serviceaccount:default:console-user"
	for _, tc := range []struct {
		name, user, ns, vm, sub string
		code                    int
		msg                     string
	}{
		{"second console", "console-user", "default", vm, "console", 409, `the console of the VirtualMachine is in use by "` + holder + `"`},
		{"vnc without the right", "console-user", "default", vm, "vnc", 403, `cannot get resource "virtualmachines/vnc" in API group "` + vapiGroup + `" in the namespace "default"`},
		{"another namespace", "console-user", "kube-system", vm, "console", 403, `cannot get resource "virtualmachines/console" in API group "` + vapiGroup + `" in the namespace "kube-system"`},
		{"no right", "no-console", "default", vm, "console", 403, `User "system:serviceaccount:default:no-console" cannot get resource "virtualmachines/console"`},
		{"missing VM", "console-user", "default", "nope", "console", 404, `virtualmachines.virtualization.deckhouse.io "nope" not found`},
	} {
		code, msg := refusal(ctx, as(tc.user), tc.ns, tc.vm, tc.sub)
		if code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: %d %s\nwant %d with %s", tc.name, code, msg, tc.code, tc.msg)
		}
	}
	// The chart runs two replicas here (devstack/chart-values/local.yaml); each request lands on
	// either: every one of them sees the session, held in a Lease of the module's namespace.
	for i := 0; i < 8; i++ {
		if code, msg := refusal(ctx, as("console-user"), "default", vm, "console"); code != http.StatusConflict || !strings.Contains(msg, `in use by "`+holder+`"`) {
			t.Errorf("second console, try %d: %d %s", i, code, msg)
		}
		probe := st.kubectl(t, admin, "get", "--raw", vapiPrefix+"default/virtualmachines/"+vm+"/console")
		if !strings.Contains(probe, `"held":true,"holder":"`+holder+`"`) {
			t.Errorf("session probe, try %d: %s", i, probe)
		}
	}
	if leases := st.kubectl(t, admin, "-n", module.Namespace, "get", "leases", "-l", "virtualization.deckhouse.io/vm-session=console",
		"-o", `jsonpath={range .items[*]}{.metadata.annotations.virtualization\.deckhouse\.io/vm} {.metadata.annotations.virtualization\.deckhouse\.io/session-user}{"\n"}{end}`); strings.TrimSpace(leases) != "default/"+vm+" "+holder {
		t.Errorf("the console session's Lease: %q", leases)
	}
	if replicas := st.kubectl(t, admin, "-n", module.Namespace, "get", "deployment", "virtualization-api", "-o", "jsonpath={.status.readyReplicas}"); replicas != "2" {
		t.Errorf("virtualization-api runs %q ready replicas, want 2", replicas)
	}
	_ = con.Close()

	t.Log("virtualization-api: the console is free again once closed")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(st.kubectl(t, admin, "get", "--raw", vapiPrefix+"default/virtualmachines/"+vm+"/console"), `"held":false`) {
		if time.Now().After(deadline) {
			t.Fatal("the console session is still held after the stream closed")
		}
		time.Sleep(500 * time.Millisecond)
	}
	checkVNCAndPortForward(t, ctx, cfg, vm)
}

// checkVNCAndPortForward opens, as the cluster admin, the guest's VNC through
// virtualization-api (the server's RFB handshake arrives; a second VNC session is refused while
// it is open) and forwards a TCP connection to the guest's PingServer (greeting, then an answer
// to each line, one of them larger than a WebSocket frame's usual read).
func checkVNCAndPortForward(t *testing.T, ctx context.Context, cfg *rest.Config, vm string) {
	t.Helper()
	t.Log("virtualization-api: VNC handshake, one VNC session at a time")
	vnc := guesttest.NewConsole(&wsConn{ws: openVAPI(t, ctx, cfg, "default", vm, "vnc")})
	if _, err := vnc.WaitFor(regexp.MustCompile(`^RFB \d{3}\.\d{3}\n`), 30*time.Second); err != nil {
		t.Fatalf("VNC through virtualization-api: %v\nso far: %q", err, vnc)
	}
	if code, msg := refusal(ctx, cfg, "default", vm, "vnc"); code != http.StatusConflict || !strings.Contains(msg, "the vnc of the VirtualMachine is in use") {
		t.Errorf("second VNC session: %d %s", code, msg)
	}
	_ = vnc.Close()

	t.Log("virtualization-api: a port-forward reaches a TCP server in the guest")
	var fwd *guesttest.Console
	deadline := time.Now().Add(time.Minute)
	for fwd == nil {
		ws, err := dialVAPI(ctx, cfg, "default", vm, fmt.Sprintf("portforward/%d/tcp", guesttest.PingServerPort))
		if err == nil {
			c := guesttest.NewConsole(&wsConn{ws: ws})
			if _, err = c.WaitFor(guesttest.PingGreeting, 10*time.Second); err == nil {
				fwd = c
				break
			}
			_ = c.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("port-forward to the guest's port %d through virtualization-api: %v", guesttest.PingServerPort, err)
		}
		time.Sleep(time.Second)
	}
	defer fwd.Close()
	if err := guesttest.Ping(fwd, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

// consoleUsers makes two ServiceAccounts in default: console-user, bound to a Role with only get
// on virtualmachines/console of the group, and no-console without any; it returns a token of each.
func consoleUsers(t *testing.T, ctx context.Context, st *stack) map[string]string {
	t.Helper()
	core, rbac := st.kube.CoreV1(), st.kube.RbacV1()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "vm-console", Namespace: "default"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{vapiGroup}, Resources: []string{"virtualmachines/console"}, Verbs: []string{"get"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "vm-console", Namespace: "default"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "console-user", Namespace: "default"}},
	}
	if _, err := rbac.Roles("default").Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings("default").Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, name := range []string{"console-user", "no-console"} {
		if _, err := core.ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		hour := int64(3600)
		tr, err := core.ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[name] = tr.Status.Token
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = rbac.RoleBindings("default").Delete(ctx, binding.Name, metav1.DeleteOptions{})
		_ = rbac.Roles("default").Delete(ctx, role.Name, metav1.DeleteOptions{})
		for name := range out {
			_ = core.ServiceAccounts("default").Delete(ctx, name, metav1.DeleteOptions{})
		}
	})
	return out
}

// dialVAPI opens a stream of virtualization-api through the cluster's API as cfg's user.
func dialVAPI(ctx context.Context, cfg *rest.Config, ns, vm, sub string) (*websocket.Conn, error) {
	rt, holder, err := wstransport.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+vapiPrefix+ns+"/virtualmachines/"+vm+"/"+sub, nil)
	if err != nil {
		return nil, err
	}
	return wstransport.Negotiate(rt, holder, req, "plain.kubevirt.io")
}

// openVAPI opens a stream, retrying while the APIService becomes available.
func openVAPI(t *testing.T, ctx context.Context, cfg *rest.Config, ns, vm, sub string) *websocket.Conn {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ws, err := dialVAPI(ctx, cfg, ns, vm, sub)
		if err == nil {
			return ws
		}
		if time.Now().After(deadline) {
			t.Fatalf("open %s of %s/%s through virtualization-api: %v", sub, ns, vm, err)
		}
		time.Sleep(time.Second)
	}
}

// refusal opens a stream that must be refused, and returns the code and message of the Status.
func refusal(ctx context.Context, cfg *rest.Config, ns, vm, sub string) (int, string) {
	ws, err := dialVAPI(ctx, cfg, ns, vm, sub)
	if err == nil {
		_ = ws.Close()
		return http.StatusSwitchingProtocols, "opened"
	}
	var up *httpstream.UpgradeFailureError
	var status apierrors.APIStatus
	if errors.As(err, &up) && errors.As(up.Cause, &status) {
		return int(status.Status().Code), status.Status().Message
	}
	return 0, err.Error()
}

// wsConn reads a plain.kubevirt.io stream across messages and writes one message per write.
type wsConn struct {
	ws *websocket.Conn
	mu sync.Mutex
	r  io.Reader
}

func (c *wsConn) Read(p []byte) (int, error) {
	for {
		if c.r == nil {
			_, r, err := c.ws.NextReader()
			if err != nil {
				return 0, err
			}
			c.r = r
		}
		n, err := c.r.Read(p)
		if err == io.EOF {
			c.r = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

func (c *wsConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *wsConn) Close() error {
	c.mu.Lock()
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	c.mu.Unlock()
	return c.ws.Close()
}
