package subresources

import (
	"net/http"

	"k8s.io/apimachinery/pkg/version"

	"github.com/d8virt/kubevirt-core/pkg/apistatus"
	"github.com/d8virt/kubevirt-core/pkg/buildinfo"
)

// ServerVersion reads the Kubernetes apiserver's version: client-go's discovery client, whose
// requests time out after 32 s.
type ServerVersion interface {
	ServerVersion() (*version.Info, error)
}

// GuestfsInfo is what GET .../guestfs answers, KubeVirt's kubecli.GuestfsInfo: where virtctl
// guestfs finds the libguestfs-tools image. This core ships none: the tag is the core's version
// and the rest is empty.
type GuestfsInfo struct {
	Registry    string `json:"registry"`
	Tag         string `json:"tag"`
	Digest      string `json:"digest"`
	ImagePrefix string `json:"imagePrefix"`
	GsImage     string `json:"gsImage"`
}

// Info is what the group's information routes answer.
type Info struct {
	Build buildinfo.Info
	// Kube is the apiserver virt-api talks to, through its rewriter; healthz asks it.
	Kube ServerVersion
}

// infoRoutes are version, guestfs and healthz. As KubeVirt's authorizer lets its information
// endpoints through for anyone, they need neither the front proxy nor a SubjectAccessReview
// (a probe can call healthz); infoPaths lists them for the Handler.
func (s *Server) infoRoutes(mux *http.ServeMux, prefix string, infoPaths map[string]bool) {
	for sub, h := range map[string]http.HandlerFunc{
		"version": func(w http.ResponseWriter, _ *http.Request) { apistatus.WriteJSON(w, http.StatusOK, s.Info.Build) },
		"guestfs": func(w http.ResponseWriter, _ *http.Request) {
			apistatus.WriteJSON(w, http.StatusOK, GuestfsInfo{Tag: s.Info.Build.GitVersion})
		},
		"healthz": s.healthz,
	} {
		mux.HandleFunc("GET "+prefix+"/"+sub, h)
		infoPaths[prefix+"/"+sub] = true
	}
}

// healthz answers as KubeVirt's KubeConnectionHealthz: 200 with the apiserver's version when it
// answers, else 500 with the error. There is no KubeVirt configuration object here, so
// config-resource-version is empty.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	v, err := s.Info.Kube.ServerVersion()
	if err != nil {
		apistatus.WriteJSON(w, http.StatusInternalServerError, map[string]any{
			"apiserver": map[string]any{"connectivity": "failed", "error": err.Error()},
		})
		return
	}
	apistatus.WriteJSON(w, http.StatusOK, map[string]any{
		"apiserver":               map[string]any{"connectivity": "ok", "version": v},
		"config-resource-version": "",
	})
}
