package subresources

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/kubevirt-core/pkg/apistatus"
	"github.com/d8virt/kubevirt-core/pkg/hotplug"
)

// VolumeRequest decodes the body of addvolume (add) or removevolume and checks it as KubeVirt
// does: the options need a name, an add a disk and a volume source. The added volume is marked
// hotpluggable and its disk takes the volume's name.
func VolumeRequest(add bool, body io.Reader) (*kubevirtv1.VirtualMachineVolumeRequest, *apierrors.StatusError) {
	decode := func(into any) *apierrors.StatusError {
		if err := yaml.NewYAMLOrJSONDecoder(body, 1024).Decode(into); err != nil && !errors.Is(err, io.EOF) {
			return apierrors.NewBadRequest(fmt.Sprintf("Can not unmarshal Request body to struct, error: %s", err))
		}
		return nil
	}
	if !add {
		opts := &kubevirtv1.RemoveVolumeOptions{}
		if serr := decode(opts); serr != nil {
			return nil, serr
		}
		if opts.Name == "" {
			return nil, apierrors.NewBadRequest("RemoveVolumeOptions requires name to be set")
		}
		return &kubevirtv1.VirtualMachineVolumeRequest{RemoveVolumeOptions: opts}, nil
	}
	opts := &kubevirtv1.AddVolumeOptions{}
	if serr := decode(opts); serr != nil {
		return nil, serr
	}
	switch {
	case opts.Name == "":
		return nil, apierrors.NewBadRequest("AddVolumeOptions requires name to be set")
	case opts.Disk == nil:
		return nil, apierrors.NewBadRequest("AddVolumeOptions requires disk to not be nil")
	case opts.VolumeSource == nil:
		return nil, apierrors.NewBadRequest("AddVolumeOptions requires VolumeSource to not be nil")
	}
	opts.Disk.Name = opts.Name
	switch {
	case opts.VolumeSource.DataVolume != nil:
		opts.VolumeSource.DataVolume.Hotpluggable = true
	case opts.VolumeSource.PersistentVolumeClaim != nil:
		opts.VolumeSource.PersistentVolumeClaim.Hotpluggable = true
	}
	return &kubevirtv1.VirtualMachineVolumeRequest{AddVolumeOptions: opts}, nil
}

type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// replaceOps tests path for old and then sets it to v: a concurrent change of the list makes the
// patch fail instead of being overwritten.
func replaceOps(path string, old, v any, empty bool) []patchOp {
	verb := "replace"
	if empty {
		verb = "add"
	}
	return []patchOp{{Op: "test", Path: path, Value: old}, {Op: verb, Path: path, Value: v}}
}

// volumePlan is PUT .../virtualmachines/NAME/addvolume|removevolume: the request joins the VM's
// status.volumeRequests, which the VM controller applies to the template and the running VMI.
func volumePlan(add bool) vmCommand {
	return func(vm *kubevirtv1.VirtualMachine, _ *kubevirtv1.VirtualMachineInstance, body io.Reader) (Plan, *apierrors.StatusError) {
		req, serr := VolumeRequest(add, body)
		if serr != nil {
			return Plan{}, serr
		}
		return VMVolumePlan(vm, req)
	}
}

// VMVolumePlan is the status patch that queues req on vm, or KubeVirt's 409.
func VMVolumePlan(vm *kubevirtv1.VirtualMachine, req *kubevirtv1.VirtualMachineVolumeRequest) (Plan, *apierrors.StatusError) {
	var volumes []kubevirtv1.Volume
	if vm.Spec.Template != nil {
		volumes = vm.Spec.Template.Spec.Volumes
	}
	if err := hotplug.Verify(volumes, req); err != nil {
		return Plan{}, conflict(vm.Name, "%s", err.Error())
	}
	reqs, err := hotplug.Queue(vm.Status.VolumeRequests, *req)
	if err != nil {
		return Plan{}, conflict(vm.Name, "%s", err.Error())
	}
	ops := replaceOps("/status/volumeRequests", vm.Status.VolumeRequests, reqs, len(vm.Status.VolumeRequests) == 0)
	if equality.Semantic.DeepEqual(vm.Status, kubevirtv1.VirtualMachineStatus{}) {
		// No status yet: a test below /status would fail on the missing parent.
		ops = []patchOp{{Op: "add", Path: "/status", Value: kubevirtv1.VirtualMachineStatus{VolumeRequests: reqs}}}
	}
	p, err := json.Marshal(ops)
	if err != nil {
		return Plan{}, apierrors.NewInternalError(err)
	}
	return dryRunPlan(volumeDryRun(req), func() (Plan, *apierrors.StatusError) { return Plan{StatusJSONPatch: p}, nil })
}

// volumeDryRun is the request's dryRun option.
func volumeDryRun(req *kubevirtv1.VirtualMachineVolumeRequest) []string {
	switch {
	case req.AddVolumeOptions != nil:
		return req.AddVolumeOptions.DryRun
	case req.RemoveVolumeOptions != nil:
		return req.RemoveVolumeOptions.DryRun
	}
	return nil
}

// VMIVolumePatch is the JSON patch of a running VMI's volumes and disks for req, or KubeVirt's
// 409: the VMI must run, and the request must fit its volumes.
func VMIVolumePatch(vmi *kubevirtv1.VirtualMachineInstance, req *kubevirtv1.VirtualMachineVolumeRequest) ([]byte, *apierrors.StatusError) {
	if vmi.Status.Phase != kubevirtv1.Running {
		return nil, apierrors.NewConflict(vmiResource, vmi.Name, errors.New("VMI is not running"))
	}
	if err := hotplug.Verify(vmi.Spec.Volumes, req); err != nil {
		return nil, apierrors.NewConflict(vmiResource, vmi.Name, err)
	}
	spec := vmi.Spec.DeepCopy()
	hotplug.Apply(spec, req)
	ops := append(replaceOps("/spec/volumes", vmi.Spec.Volumes, spec.Volumes, len(vmi.Spec.Volumes) == 0),
		replaceOps("/spec/domain/devices/disks", vmi.Spec.Domain.Devices.Disks, spec.Domain.Devices.Disks, len(vmi.Spec.Domain.Devices.Disks) == 0)...)
	p, err := json.Marshal(ops)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return p, nil
}

// vmiVolumeHandler is PUT .../virtualmachineinstances/NAME/addvolume|removevolume: the VMI's spec
// changes at once (the VM, if any, keeps its template: the change is ephemeral).
func (s *Server) vmiVolumeHandler(add bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req, serr := VolumeRequest(add, r.Body)
		if serr != nil {
			apistatus.Write(w, serr)
			return
		}
		ctx := r.Context()
		key := types.NamespacedName{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := s.Client.Get(ctx, key, vmi); err != nil {
			apistatus.Write(w, notFoundOr(err, "virtualmachineinstance", key.Name))
			return
		}
		p, serr := VMIVolumePatch(vmi, req)
		if serr != nil {
			apistatus.Write(w, serr)
			return
		}
		dry, serr := DryRun(volumeDryRun(req))
		if serr == nil && !dry {
			dry, serr = requestDryRun(r)
		}
		if serr != nil {
			apistatus.Write(w, serr)
			return
		}
		var opts []client.PatchOption
		if dry {
			opts = append(opts, client.DryRunAll)
		}
		if err := s.Client.Patch(ctx, vmi, client.RawPatch(types.JSONPatchType, p), opts...); err != nil {
			var status apierrors.APIStatus
			switch {
			case strings.Contains(err.Error(), "test operation does not apply") || apierrors.IsConflict(err):
				apistatus.Write(w, apierrors.NewConflict(vmiResource, vmi.Name, err))
			case apierrors.IsInvalid(err) && errors.As(err, &status):
				apistatus.Write(w, &apierrors.StatusError{ErrStatus: status.Status()})
			default:
				apistatus.Write(w, apierrors.NewInternalError(fmt.Errorf("unable to patch vmi: %w", err)))
			}
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}
}
