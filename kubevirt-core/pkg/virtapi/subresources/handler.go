package subresources

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/kubevirt-core/pkg/apistatus"
	"github.com/d8virt/kubevirt-core/pkg/virtapicontract"
)

// Server serves subresources.kubevirt.io/v1 (and v1alpha3, the same routes).
type Server struct {
	// Client speaks kubevirt.io (through the rewriter).
	Client     client.Client
	Auth       *RequestHeader
	Authorizer Authorizer
	// Nodes reaches the virt-handler of a VMI's node; nil answers node commands with 503.
	Nodes *NodeProxy
	// Info is what the version, guestfs and healthz routes answer.
	Info Info
	Log  *slog.Logger
}

type vmCommand func(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, body io.Reader) (Plan, *apierrors.StatusError)

// Handler routes the API: every version of virtapicontract.SubresourcesVersions, and /healthz.
// What KubeVirt has and the core does not serve answers 501 (unsupported.go); other paths a
// 404 Status, and a served path with another method a 405 Status.
func (s *Server) Handler() http.Handler {
	mux, info := s.routes()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if info[r.URL.Path] {
			mux.ServeHTTP(w, r)
			return
		}
		if _, err := s.Auth.Authenticate(r); err != nil {
			apistatus.Write(w, apierrors.NewUnauthorized(err.Error()))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// routes is the API's mux and the paths of its information routes.
func (s *Server) routes() (*http.ServeMux, map[string]bool) {
	mux := http.NewServeMux()
	info := map[string]bool{"/healthz": true}
	for _, v := range virtapicontract.SubresourcesVersions {
		s.versionRoutes(mux, "/apis/"+virtapicontract.SubresourcesGroup+"/"+v, virtapicontract.SubresourcesGroup+"/"+v, info)
	}
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { apistatus.Write(w, unrouted(mux, r)) })
	return mux, info
}

func (s *Server) versionRoutes(mux *http.ServeMux, prefix, groupVersion string, infoPaths map[string]bool) {
	mux.HandleFunc("GET "+prefix+"/{$}", s.discovery(groupVersion))
	mux.HandleFunc("GET "+prefix, s.discovery(groupVersion))
	for name, cmd := range map[string]vmCommand{
		"start":   withOptions(StartPlan),
		"stop":    withOptions(StopPlan),
		"restart": withOptions(RestartPlan),
		"migrate": withOptions(MigratePlan),
		// Volume hotplug (volumes.go).
		"addvolume":    volumePlan(true),
		"removevolume": volumePlan(false),
	} {
		mux.HandleFunc("PUT "+prefix+"/namespaces/{ns}/virtualmachines/{name}/"+name, s.authorized("update", "virtualmachines", name, s.vmHandler(cmd)))
	}
	for _, name := range []string{"pause", "unpause", "freeze", "unfreeze", "softreboot", "reset"} {
		mux.HandleFunc("PUT "+prefix+"/namespaces/{ns}/virtualmachineinstances/{name}/"+name, s.authorized("update", "virtualmachineinstances", name, s.vmiHandler(name)))
	}
	for name, add := range map[string]bool{"addvolume": true, "removevolume": false} {
		mux.HandleFunc("PUT "+prefix+"/namespaces/{ns}/virtualmachineinstances/{name}/"+name, s.authorized("update", "virtualmachineinstances", name, s.vmiVolumeHandler(add)))
	}
	for _, name := range []string{"console", "vnc"} {
		mux.HandleFunc("GET "+prefix+"/namespaces/{ns}/virtualmachineinstances/{name}/"+name, s.authorized("get", "virtualmachineinstances", name, s.vmiHandler(name)))
	}
	for name := range GuestAgentSubresources {
		mux.HandleFunc("GET "+prefix+"/namespaces/{ns}/virtualmachineinstances/{name}/"+name, s.authorized("get", "virtualmachineinstances", name, s.guestAgentHandler(name)))
	}
	s.portForwardRoutes(mux, prefix)
	s.infoRoutes(mux, prefix, infoPaths)
	unsupportedRoutes(mux, prefix)
}

// resources is the discovery document; the aggregator checks it to mark the APIService available.
var resources = func() []metav1.APIResource {
	var out []metav1.APIResource
	for _, sub := range []string{"start", "stop", "restart", "migrate", "addvolume", "removevolume"} {
		out = append(out, metav1.APIResource{Name: "virtualmachines/" + sub, Namespaced: true, Kind: "VirtualMachine", Verbs: []string{"update"}})
	}
	for _, sub := range []string{"pause", "unpause", "freeze", "unfreeze", "softreboot", "reset", "addvolume", "removevolume"} {
		out = append(out, metav1.APIResource{Name: "virtualmachineinstances/" + sub, Namespaced: true, Kind: "VirtualMachineInstance", Verbs: []string{"update"}})
	}
	for _, sub := range []string{"console", "vnc", "guestosinfo", "userlist", "filesystemlist"} {
		out = append(out, metav1.APIResource{Name: "virtualmachineinstances/" + sub, Namespaced: true, Kind: "VirtualMachineInstance", Verbs: []string{"get"}})
	}
	return append(out, portForwardResources...)
}()

// served are the resource/subresource names virt-api serves, as its discovery lists them.
func served() map[string]bool {
	out := map[string]bool{}
	for _, r := range resources {
		out[r.Name] = true
	}
	return out
}

func (s *Server) discovery(groupVersion string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		apistatus.WriteJSON(w, http.StatusOK, &metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: groupVersion, APIResources: resources,
		})
	}
}

// authorized checks RBAC for verb on resource/sub before running next.
func (s *Server) authorized(verb, resource, sub string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u, err := s.Auth.Authenticate(r)
		if err != nil {
			apistatus.Write(w, apierrors.NewUnauthorized(err.Error()))
			return
		}
		ns, name := r.PathValue("ns"), r.PathValue("name")
		ok, reason, err := s.Authorizer.Allowed(r.Context(), u, verb, ns, resource, sub, name)
		if err != nil {
			apistatus.Write(w, apierrors.NewInternalError(err))
			return
		}
		if !ok {
			gr := kubevirtv1.Resource(resource + "/" + sub)
			gr.Group = virtapicontract.SubresourcesGroup
			apistatus.Write(w, apierrors.NewForbidden(gr, name, fmt.Errorf("user %q cannot %s %s/%s in namespace %q: %s", u.Name, verb, resource, sub, ns, reason)))
			return
		}
		next(w, r)
	}
}

// withOptions decodes a command's optional body, as KubeVirt does: JSON or YAML, empty allowed.
func withOptions[O any](plan func(*kubevirtv1.VirtualMachine, *kubevirtv1.VirtualMachineInstance, O) (Plan, *apierrors.StatusError)) vmCommand {
	return func(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, body io.Reader) (Plan, *apierrors.StatusError) {
		var opts O
		if err := yaml.NewYAMLOrJSONDecoder(body, 1024).Decode(&opts); err != nil && !errors.Is(err, io.EOF) {
			return Plan{}, apierrors.NewBadRequest(fmt.Sprintf("Can not unmarshal Request body to struct, error: %s", err))
		}
		return plan(vm, vmi, opts)
	}
}

func (s *Server) vmHandler(cmd vmCommand) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		key := types.NamespacedName{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}
		vm := &kubevirtv1.VirtualMachine{}
		if err := s.Client.Get(ctx, key, vm); err != nil {
			apistatus.Write(w, notFoundOr(err, "virtualmachine", key.Name))
			return
		}
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := s.Client.Get(ctx, key, vmi); apierrors.IsNotFound(err) {
			vmi = nil
		} else if err != nil {
			apistatus.Write(w, apierrors.NewInternalError(err))
			return
		}
		dry, serr := requestDryRun(r)
		if serr != nil {
			apistatus.Write(w, serr)
			return
		}
		plan, serr := cmd(vm, vmi, r.Body)
		if serr != nil {
			apistatus.Write(w, serr)
			return
		}
		plan.DryRun = plan.DryRun || dry
		if serr := s.apply(ctx, vm, plan); serr != nil {
			apistatus.Write(w, serr)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}
}

func (s *Server) apply(ctx context.Context, vm *kubevirtv1.VirtualMachine, p Plan) *apierrors.StatusError {
	var err error
	var patchOpts []client.PatchOption
	var statusOpts []client.SubResourcePatchOption
	if p.DryRun {
		patchOpts, statusOpts = append(patchOpts, client.DryRunAll), append(statusOpts, client.DryRunAll)
	}
	switch {
	case p.SpecMergePatch != nil:
		err = s.Client.Patch(ctx, vm, client.RawPatch(types.MergePatchType, p.SpecMergePatch), patchOpts...)
	case p.StatusJSONPatch != nil:
		err = s.Client.Status().Patch(ctx, vm, client.RawPatch(types.JSONPatchType, p.StatusJSONPatch), statusOpts...)
	}
	if err != nil {
		// A failed test op means another command got there first.
		if strings.Contains(err.Error(), "test operation does not apply") || apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
			return apierrors.NewConflict(vmResource, vm.Name, err)
		}
		return apierrors.NewInternalError(err)
	}
	if p.DeleteLauncherOf != nil {
		return s.forceStop(ctx, p.DeleteLauncherOf, p.DryRun)
	}
	if p.CreateMigration != nil {
		var opts []client.CreateOption
		if p.DryRun {
			opts = append(opts, client.DryRunAll)
		}
		if err := s.Client.Create(ctx, p.CreateMigration, opts...); err != nil {
			if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
				// The migration webhook's refusal is the caller's answer.
				return apierrors.NewBadRequest(err.Error())
			}
			return apierrors.NewInternalError(err)
		}
	}
	return nil
}

// forceStop deletes the running launcher Pod without grace, for restart with gracePeriod 0.
func (s *Server) forceStop(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, dryRun bool) *apierrors.StatusError {
	opts := []client.DeleteOption{client.GracePeriodSeconds(0)}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	var pods corev1.PodList
	if err := s.Client.List(ctx, &pods, client.InNamespace(vmi.Namespace), client.MatchingLabels{
		kubevirtv1.AppLabel: "virt-launcher", kubevirtv1.CreatedByLabel: string(vmi.UID),
	}); err != nil {
		return apierrors.NewInternalError(err)
	}
	for i := range pods.Items {
		if pods.Items[i].Status.Phase != corev1.PodRunning {
			continue
		}
		if err := s.Client.Delete(ctx, &pods.Items[i], opts...); client.IgnoreNotFound(err) != nil {
			return apierrors.NewInternalError(err)
		}
	}
	return nil
}

// vmiHandler checks what KubeVirt checks before it relays a command to the VMI's virt-handler,
// then relays it: streams as WebSockets, the rest as a PUT.
func (s *Server) vmiHandler(cmd string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := types.NamespacedName{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := s.Client.Get(r.Context(), key, vmi); err != nil {
			apistatus.Write(w, notFoundOr(err, "virtualmachineinstance", key.Name))
			return
		}
		if serr := ValidateVMICommand(cmd, vmi); serr != nil {
			apistatus.Write(w, serr)
			return
		}
		if dry, serr := commandDryRun(cmd, r); serr != nil || dry {
			// Checked as a real command would be; nothing reaches the node.
			if serr != nil {
				apistatus.Write(w, serr)
				return
			}
			w.WriteHeader(http.StatusOK)
			return
		}
		if s.Nodes == nil {
			apistatus.Write(w, apierrors.NewServiceUnavailable(fmt.Sprintf("virt-handler on node %q is not reachable", vmi.Status.NodeName)))
			return
		}
		path := "/v1/namespaces/" + vmi.Namespace + "/virtualmachineinstances/" + vmi.Name + "/" + cmd
		if cmd == "console" || cmd == "vnc" {
			s.Nodes.Stream(w, r, vmi.Status.NodeName, path)
			return
		}
		s.Nodes.Command(w, r, vmi.Status.NodeName, path)
	}
}

// commandDryRun reads a node command's dryRun: the query's, and for pause and unpause also
// their options' (PauseOptions, UnpauseOptions). Streams are never dry runs.
func commandDryRun(cmd string, r *http.Request) (bool, *apierrors.StatusError) {
	if r.Method != http.MethodPut {
		return false, nil
	}
	if cmd == "pause" || cmd == "unpause" {
		var opts kubevirtv1.PauseOptions
		if err := yaml.NewYAMLOrJSONDecoder(r.Body, 1024).Decode(&opts); err != nil && !errors.Is(err, io.EOF) {
			return false, apierrors.NewBadRequest(fmt.Sprintf("Can not unmarshal Request body to struct, error: %s", err))
		}
		if dry, serr := DryRun(opts.DryRun); serr != nil || dry {
			return dry, serr
		}
	}
	return requestDryRun(r)
}

func notFoundOr(err error, resource, name string) *apierrors.StatusError {
	if apierrors.IsNotFound(err) {
		return apierrors.NewNotFound(kubevirtv1.Resource(resource), name)
	}
	return apierrors.NewInternalError(fmt.Errorf("unable to retrieve %s [%s]: %w", resource, name, err))
}
