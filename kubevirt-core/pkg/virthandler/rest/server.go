// Package rest is virt-handler's API for virt-api: the VMI commands that need the node (pause,
// unpause, freeze, unfreeze, softreboot), the guest agent's reports (guestosinfo, userlist,
// filesystemlist) and the console and VNC streams. virt-api reaches it over
// mutual TLS at the handler Pod's IP, with the paths KubeVirt's handler serves.
package rest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/kubevirt-core/pkg/apistatus"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/launcherpod"
	"github.com/d8virt/kubevirt-core/pkg/unixsock"
	"github.com/d8virt/kubevirt-core/pkg/virthandler/launcherconn"
	"github.com/d8virt/kubevirt-core/pkg/virthandler/vmisync"
	"github.com/d8virt/kubevirt-core/pkg/wsrelay"
)

// Server serves one node's VMIs.
type Server struct {
	Client   client.Reader
	NodeName string
	PodsDir  string
	Conns    *launcherconn.Manager
	Log      *slog.Logger

	mu       sync.Mutex
	sessions map[string]*session // stream key -> the running session
}

// Handler routes the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	const base = "/v1/namespaces/{ns}/virtualmachineinstances/{name}/"
	for cmd, call := range map[string]func(*launcherapi.Client, context.Context) error{
		"pause":      (*launcherapi.Client).Pause,
		"unpause":    (*launcherapi.Client).Unpause,
		"freeze":     (*launcherapi.Client).Freeze,
		"unfreeze":   (*launcherapi.Client).Unfreeze,
		"softreboot": (*launcherapi.Client).SoftReboot,
		"reset":      (*launcherapi.Client).Reset,
	} {
		mux.HandleFunc("PUT "+base+cmd, s.command(cmd, call))
	}
	for sub, view := range guestViews {
		mux.HandleFunc("GET "+base+sub, s.guestInfo(sub, view))
	}
	mux.HandleFunc("GET "+base+"console", s.stream("console", launcherapi.SerialSocketName))
	mux.HandleFunc("GET "+base+"vnc", s.stream("vnc", launcherapi.VNCSocketName))
	mux.HandleFunc("GET "+base+"portforward/{port}", s.portForward)
	mux.HandleFunc("GET "+base+"portforward/{port}/{protocol}", s.portForward)
	return mux
}

// target finds a VMI running on this node and its launcher Pod.
func (s *Server) target(r *http.Request) (*kubevirtv1.VirtualMachineInstance, *corev1.Pod, *apierrors.StatusError) {
	key := types.NamespacedName{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}
	v := &kubevirtv1.VirtualMachineInstance{}
	if err := s.Client.Get(r.Context(), key, v); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, apierrors.NewNotFound(kubevirtv1.Resource("virtualmachineinstance"), key.Name)
		}
		return nil, nil, apierrors.NewInternalError(err)
	}
	if v.Status.NodeName != s.NodeName || v.Status.Phase != kubevirtv1.Running {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("VMI %s is not running on node %s", key.Name, s.NodeName))
	}
	own, err := launcherpod.List(r.Context(), s.Client, v, func(p *corev1.Pod) bool {
		return p.Spec.NodeName == s.NodeName && p.Status.Phase == corev1.PodRunning
	})
	if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	pod := launcherpod.Current(own)
	if pod == nil {
		return nil, nil, apierrors.NewServiceUnavailable(fmt.Sprintf("VMI %s has no running launcher on node %s", key.Name, s.NodeName))
	}
	return v, pod, nil
}

// launcher finds the request's VMI and a connection to its launcher, or answers the error.
func (s *Server) launcher(w http.ResponseWriter, r *http.Request) (*kubevirtv1.VirtualMachineInstance, *launcherapi.Client, bool) {
	v, pod, serr := s.target(r)
	if serr != nil {
		apistatus.Write(w, serr)
		return nil, nil, false
	}
	c, err := s.Conns.Ensure(pod.UID, types.NamespacedName{Namespace: v.Namespace, Name: v.Name}, vmisync.SocketPath(s.PodsDir, pod))
	if err != nil {
		apistatus.Write(w, apierrors.NewServiceUnavailable(fmt.Sprintf("launcher of VMI %s: %v", v.Name, err)))
		return nil, nil, false
	}
	return v, c, true
}

func (s *Server) command(name string, call func(*launcherapi.Client, context.Context) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, c, ok := s.launcher(w, r)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		if err := call(c, ctx); err != nil {
			apistatus.Write(w, launcherError(name, v.Name, err))
			return
		}
		s.Log.Info("VMI command done", "command", name, "vmi", v.Namespace+"/"+v.Name)
		w.WriteHeader(http.StatusOK)
	}
}

// launcherError turns a launcher refusal into the status virt-api passes on: a precondition the
// guest does not meet is the caller's problem (409), anything else the server's.
func launcherError(cmd, name string, err error) *apierrors.StatusError {
	msg := fmt.Sprintf("failed to %s VMI %s: %s", cmd, name, status.Convert(err).Message())
	switch status.Code(err) {
	case codes.FailedPrecondition, codes.InvalidArgument:
		return apierrors.NewConflict(kubevirtv1.Resource("virtualmachineinstance"), name, errors.New(msg))
	case codes.Unavailable:
		return apierrors.NewServiceUnavailable(msg)
	}
	return apierrors.NewInternalError(errors.New(msg))
}

var upgrader = websocket.Upgrader{
	Subprotocols:    []string{wsrelay.PlainSubprotocol},
	ReadBufferSize:  32 << 10,
	WriteBufferSize: 32 << 10,
	// virt-api is the only client and it is authenticated by its certificate, not by Origin.
	CheckOrigin: func(*http.Request) bool { return true },
}

// stream relays a WebSocket to the launcher's console or VNC socket. Each VMI has one session per
// stream: a new one ends the old one, as with KubeVirt, so that a client whose connection died
// half-open cannot lock everyone out.
func (s *Server) stream(kind, socketName string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, pod, serr := s.target(r)
		if serr != nil {
			apistatus.Write(w, serr)
			return
		}
		sock := filepath.Join(launcherapi.PodVolumeDir(s.PodsDir, string(pod.UID), launcherapi.PrivateVolume), string(v.UID), socketName)
		dctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		guest, err := unixsock.Dial(dctx, sock)
		cancel()
		if err != nil {
			apistatus.Write(w, apierrors.NewServiceUnavailable(fmt.Sprintf("%s of VMI %s is not available: %v", kind, v.Name, err)))
			return
		}
		s.relay(w, r, v, kind, guest, kind+"/"+string(v.UID))
	}
}

// relay upgrades the request and copies between the WebSocket and guest until either ends.
// A session key makes the stream exclusive: a new session with the same key ends this one.
func (s *Server) relay(w http.ResponseWriter, r *http.Request, v *kubevirtv1.VirtualMachineInstance, kind string, guest net.Conn, key string) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		_ = guest.Close()
		return // Upgrade has answered the client.
	}
	sess := &session{}
	sess.end = func() {
		sess.once.Do(func() {
			_ = guest.Close()
			_ = ws.Close()
		})
	}
	defer sess.end()
	if key != "" {
		s.mu.Lock()
		if s.sessions == nil {
			s.sessions = map[string]*session{}
		}
		if old := s.sessions[key]; old != nil {
			old.end()
		}
		s.sessions[key] = sess
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			// Only this session's own entry may go: a newer one may have replaced it.
			if s.sessions[key] == sess {
				delete(s.sessions, key)
			}
			s.mu.Unlock()
		}()
	}
	s.Log.Info("stream opened", "stream", kind, "vmi", v.Namespace+"/"+v.Name)
	wsrelay.Raw(ws, guest)
	s.Log.Info("stream closed", "stream", kind, "vmi", v.Namespace+"/"+v.Name)
}

// session is one running stream; end closes both of its sides.
type session struct {
	once sync.Once
	end  func()
}
