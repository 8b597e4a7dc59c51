// Package registry is the REST storage of subresources.virtualization.deckhouse.io: the
// resource virtualmachines (no verbs of its own) and a connecter for each of its subresources.
// A call checks that the friendly VirtualMachine exists and allows it, then goes to the core's
// virt-api for the internal VMI of the same namespace and name.
package registry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	virtv1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/kubevirt-core/pkg/wsrelay"
	subv1alpha2 "github.com/d8virt/virtualization-api/pkg/apis/subresources/v1alpha2"
	"github.com/d8virt/virtualization-api/pkg/core"
	"github.com/d8virt/virtualization-api/pkg/metrics"
	"github.com/d8virt/virtualization-api/pkg/relay"
	"github.com/d8virt/virtualization-api/pkg/sessions"
	"github.com/d8virt/virtualization-api/pkg/subresource"
)

// VMs reads friendly VirtualMachines.
type VMs interface {
	Get(ctx context.Context, namespace, name string) (*virtv1alpha2.VirtualMachine, error)
}

// Core is the core's virt-api (core.Client).
type Core interface {
	Stream(ctx context.Context, namespace, name, path string) (*websocket.Conn, error)
	Call(ctx context.Context, method, namespace, name, path string, body io.Reader) (int, string, []byte, error)
}

// Deps are what the connecters share.
type Deps struct {
	VMs      VMs
	Core     Core
	Sessions *sessions.Registry
	Metrics  *metrics.Metrics
	Relay    relay.Config
	// Log gets one line per stream that ends.
	Log func(msg string, kv ...any)
}

// Storage is the group version's storage map: virtualmachines and its subresources.
func Storage(d Deps) map[string]rest.Storage {
	m := map[string]rest.Storage{"virtualmachines": vmStorage{
		vms:            d.VMs,
		TableConvertor: rest.NewDefaultTableConvertor(subv1alpha2.SchemeGroupVersion.WithResource("virtualmachines").GroupResource()),
	}}
	for _, s := range subresource.All {
		m["virtualmachines/"+s.Name] = &connecter{sub: s, d: d}
	}
	return m
}

// vmStorage is the resource virtualmachines itself. Its get shows the friendly VM whose
// subresources these are (its metadata); it stores nothing. (kubectl api-resources lists only
// resources with a verb.)
type vmStorage struct {
	vms VMs
	rest.TableConvertor
}

var (
	_ rest.Storage              = vmStorage{}
	_ rest.Scoper               = vmStorage{}
	_ rest.SingularNameProvider = vmStorage{}
	_ rest.Getter               = vmStorage{}
)

// Get is the friendly VM's metadata under this group's kind.
func (s vmStorage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns, _ := request.NamespaceFrom(ctx)
	vm, err := s.vms.Get(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	out := &subv1alpha2.VirtualMachine{ObjectMeta: metav1.ObjectMeta{
		Name: vm.Name, Namespace: vm.Namespace, UID: vm.UID, CreationTimestamp: vm.CreationTimestamp,
		Labels: vm.Labels, DeletionTimestamp: vm.DeletionTimestamp,
	}}
	return out, nil
}

func (vmStorage) New() runtime.Object     { return &subv1alpha2.VirtualMachine{} }
func (vmStorage) Destroy()                {}
func (vmStorage) NamespaceScoped() bool   { return true }
func (vmStorage) GetSingularName() string { return "virtualmachine" }

// connecter serves one subresource.
type connecter struct {
	sub subresource.Subresource
	d   Deps
}

var _ rest.Connecter = &connecter{}

func (c *connecter) New() runtime.Object { return &subv1alpha2.VirtualMachine{} }
func (c *connecter) Destroy()            {}
func (c *connecter) ConnectMethods() []string {
	return []string{c.sub.Method}
}

// NewConnectOptions: no options object; portforward takes the rest of the path.
func (c *connecter) NewConnectOptions() (runtime.Object, bool, string) {
	return nil, c.sub.Subpath, ""
}

// Connect checks the VM and returns the handler that streams or calls.
func (c *connecter) Connect(ctx context.Context, name string, _ runtime.Object, responder rest.Responder) (http.Handler, error) {
	verb := "get"
	if info, ok := request.RequestInfoFrom(ctx); ok {
		verb = info.Verb
	}
	h, err := c.connect(ctx, name, responder, verb)
	if err != nil {
		c.d.Metrics.Request(c.sub.Name, verb, codeOf(err))
	}
	return h, err
}

func (c *connecter) connect(ctx context.Context, name string, responder rest.Responder, verb string) (http.Handler, error) {
	ns, ok := request.NamespaceFrom(ctx)
	if !ok || ns == "" {
		return nil, apierrors.NewBadRequest("the request names no namespace")
	}
	path := c.sub.Name
	if c.sub.Subpath {
		p, err := portForwardPath(ctx)
		if err != nil {
			return nil, err
		}
		path = p
	}
	vm, err := c.d.VMs.Get(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	if err := subresource.Allow(c.sub, vm); err != nil {
		return nil, err
	}
	s := &call{c: c, vm: types.NamespacedName{Namespace: ns, Name: name}, path: path, verb: verb, responder: responder}
	if c.sub.Stream {
		return http.HandlerFunc(s.stream), nil
	}
	return http.HandlerFunc(s.call), nil
}

// portForwardPath is the core's path for .../portforward/PORT[/PROTOCOL].
func portForwardPath(ctx context.Context) (string, error) {
	info, ok := request.RequestInfoFrom(ctx)
	if !ok {
		return "", apierrors.NewBadRequest("no request info")
	}
	// virtualmachines NAME portforward PORT [PROTOCOL]
	parts := info.Parts
	if len(parts) < 4 || len(parts) > 5 {
		return "", apierrors.NewBadRequest("portforward: the path is .../virtualmachines/NAME/portforward/PORT[/tcp|udp]")
	}
	protocol := ""
	if len(parts) == 5 {
		protocol = parts[4]
	}
	pf, err := wsrelay.ParsePortForward(parts[3], protocol)
	if err != nil {
		return "", apierrors.NewBadRequest("portforward: " + err.Error())
	}
	return pf.Path(), nil
}

// call is one request of a subresource on a checked VM.
type call struct {
	c         *connecter
	vm        types.NamespacedName
	path      string
	verb      string
	responder rest.Responder
}

func (s *call) fail(err error) {
	s.c.d.Metrics.Request(s.c.sub.Name, s.verb, codeOf(err))
	s.responder.Error(err)
}

var upgrader = websocket.Upgrader{
	Subprotocols:    []string{core.PlainSubprotocol},
	ReadBufferSize:  32 << 10,
	WriteBufferSize: 32 << 10,
	// The cluster's API in front has authorized the user; a browser's Origin is not ours to judge.
	CheckOrigin: func(*http.Request) bool { return true },
}

// stream relays the client's WebSocket to the core's. A GET without an upgrade of an exclusive
// stream is the probe: who holds the session.
func (s *call) stream(w http.ResponseWriter, req *http.Request) {
	key := sessions.Key{VM: s.vm, Stream: s.c.sub.Name}
	if !websocket.IsWebSocketUpgrade(req) {
		if !s.c.sub.Exclusive {
			s.fail(apierrors.NewBadRequest(fmt.Sprintf("%s is a WebSocket stream (subprotocol %s): ask with an upgrade", s.c.sub.Name, core.PlainSubprotocol)))
			return
		}
		out := &subv1alpha2.VirtualMachineSession{}
		h, ok, err := s.c.d.Sessions.Current(req.Context(), key)
		if err != nil {
			s.fail(err)
			return
		}
		if ok {
			since := metav1.NewTime(h.Since)
			out = &subv1alpha2.VirtualMachineSession{Held: true, Holder: h.User, Client: h.Client, StartTime: &since}
		}
		out.APIVersion, out.Kind = subv1alpha2.SchemeGroupVersion.String(), "VirtualMachineSession"
		s.c.d.Metrics.Request(s.c.sub.Name, s.verb, http.StatusOK)
		s.responder.Object(http.StatusOK, out)
		return
	}
	if s.c.sub.Exclusive {
		user := "unknown"
		if u, ok := request.UserFrom(req.Context()); ok {
			user = u.GetName()
		}
		release, err := s.c.d.Sessions.Acquire(req.Context(), key, user, clientOf(req))
		if err != nil {
			s.fail(err)
			return
		}
		defer release()
	}
	// The stream outlives the request's deadline, if the server gave it one.
	ctx := context.WithoutCancel(req.Context())
	upstream, err := s.c.d.Core.Stream(ctx, s.vm.Namespace, s.vm.Name, s.path)
	if err != nil {
		if _, ok := err.(apierrors.APIStatus); !ok {
			err = apierrors.NewServiceUnavailable(fmt.Sprintf("the core's virt-api: %v", err))
		}
		s.fail(err)
		return
	}
	client, err := upgrader.Upgrade(w, req, nil)
	if err != nil {
		// The upgrader has answered the client.
		_ = upstream.Close()
		s.c.d.Metrics.Request(s.c.sub.Name, s.verb, http.StatusBadRequest)
		return
	}
	s.c.d.Metrics.Request(s.c.sub.Name, s.verb, http.StatusSwitchingProtocols)
	closed := s.c.d.Metrics.StreamOpened(s.c.sub.Name)
	defer closed()
	cfg := s.c.d.Relay
	cfg.Count = func(dir string, n int) { s.c.d.Metrics.Bytes(s.c.sub.Name, dir, n) }
	start := time.Now()
	code := cfg.Run(client, upstream)
	s.c.d.Log("stream ended", "subresource", s.c.sub.Name, "namespace", s.vm.Namespace, "name", s.vm.Name,
		"closeCode", code, "duration", time.Since(start).Round(time.Millisecond).String())
}

// call passes the request's body to the core and its answer back.
func (s *call) call(w http.ResponseWriter, req *http.Request) {
	code, contentType, body, err := s.c.d.Core.Call(req.Context(), s.c.sub.Method, s.vm.Namespace, s.vm.Name, s.path, req.Body)
	if err != nil {
		s.fail(apierrors.NewServiceUnavailable(fmt.Sprintf("the core's virt-api: %v", err)))
		return
	}
	s.c.d.Metrics.Request(s.c.sub.Name, s.verb, code)
	if contentType != "" {
		w.Header().Set("Content-Type", contentType)
	}
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// clientOf is how the client introduced itself (User-Agent), bounded.
func clientOf(req *http.Request) string {
	agent := []rune(strings.TrimSpace(req.UserAgent()))
	if len(agent) > 128 {
		agent = agent[:128]
	}
	return string(agent)
}

// codeOf is the HTTP status of an error.
func codeOf(err error) int {
	if s, ok := err.(apierrors.APIStatus); ok {
		return int(s.Status().Code)
	}
	return http.StatusInternalServerError
}
