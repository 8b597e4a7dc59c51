// Package cloudinit builds the data source ISO of a VMI's cloud-init volume: NoCloud for
// cloudInitNoCloud, ConfigDrive for cloudInitConfigDrive, laid out as KubeVirt's launcher does.
package cloudinit

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	k8sv1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/isoimage"
)

// Kind is a type of data source: the ISO volume label cloud-init looks for and where each part
// of the data lives on the ISO.
type Kind struct {
	Label       string
	MetaData    string
	UserData    string
	NetworkData string
}

var (
	// NoCloud is cloud-init's NoCloud data source.
	NoCloud = Kind{Label: "cidata", MetaData: "meta-data", UserData: "user-data", NetworkData: "network-config"}
	// ConfigDrive is OpenStack's config drive (version 2), which cloud-init, Ignition and
	// coreos-cloudinit read.
	ConfigDrive = Kind{
		Label:       "config-2",
		MetaData:    "openstack/latest/meta_data.json",
		UserData:    "openstack/latest/user_data",
		NetworkData: "openstack/latest/network_data.json",
	}
)

// Data is the content of one data source.
type Data struct {
	Kind        Kind
	MetaData    string
	UserData    string
	NetworkData string
}

// NoCloudData resolves the data of a cloudInitNoCloud volume. field names the volume in errors,
// for example "spec.volumes[1].cloudInitNoCloud".
func NoCloudData(vmi *kubevirtv1.VirtualMachineInstance, src *kubevirtv1.CloudInitNoCloudSource, field string) (Data, error) {
	d, err := resolve(Data{Kind: NoCloud}, userAndNetwork{
		userRef: src.UserDataSecretRef, user: src.UserData, userB64: src.UserDataBase64,
		networkRef: src.NetworkDataSecretRef, network: src.NetworkData, networkB64: src.NetworkDataBase64,
	}, field)
	if err != nil {
		return Data{}, err
	}
	// instance-id changes with the VMI identity, so cloud-init reruns its per-instance modules
	// for a new VMI but not for a restart of the same one.
	d.MetaData = fmt.Sprintf("instance-id: %s.%s\nlocal-hostname: %s\n", vmi.Namespace, vmi.Name, hostname(vmi))
	return d, nil
}

// configDriveMeta is the part of OpenStack's meta_data.json that KubeVirt fills.
type configDriveMeta struct {
	InstanceID string `json:"instance_id"`
	Hostname   string `json:"hostname,omitempty"`
	UUID       string `json:"uuid,omitempty"`
}

// ConfigDriveData resolves the data of a cloudInitConfigDrive volume. uuid is the guest's SMBIOS
// UUID, which config drive readers compare with the machine's. field names the volume in errors.
func ConfigDriveData(vmi *kubevirtv1.VirtualMachineInstance, src *kubevirtv1.CloudInitConfigDriveSource, uuid, field string) (Data, error) {
	d, err := resolve(Data{Kind: ConfigDrive}, userAndNetwork{
		userRef: src.UserDataSecretRef, user: src.UserData, userB64: src.UserDataBase64,
		networkRef: src.NetworkDataSecretRef, network: src.NetworkData, networkB64: src.NetworkDataBase64,
	}, field)
	if err != nil {
		return Data{}, err
	}
	// KubeVirt's instance id for config drives is <name>.<namespace>, the reverse of NoCloud's.
	meta, err := json.Marshal(configDriveMeta{InstanceID: vmi.Name + "." + vmi.Namespace, Hostname: hostname(vmi), UUID: uuid})
	if err != nil {
		return Data{}, fmt.Errorf("%s: meta data: %w", field, err)
	}
	d.MetaData = string(meta)
	return d, nil
}

func hostname(vmi *kubevirtv1.VirtualMachineInstance) string {
	if vmi.Spec.Hostname != "" {
		return vmi.Spec.Hostname
	}
	return vmi.Name
}

// userAndNetwork are the fields both cloud-init volume sources share.
type userAndNetwork struct {
	userRef, networkRef                *k8sv1.LocalObjectReference
	user, userB64, network, networkB64 string
}

// resolve fills d's user and network data from the volume's fields.
func resolve(d Data, f userAndNetwork, field string) (Data, error) {
	// Secret references are resolved by mounting the Secret into the launcher Pod; that path does
	// not exist yet, and silently booting without the user's data would be worse than failing.
	if f.userRef != nil {
		return Data{}, fmt.Errorf("%s.secretRef: user data from a Secret is not supported yet", field)
	}
	if f.networkRef != nil {
		return Data{}, fmt.Errorf("%s.networkDataSecretRef: network data from a Secret is not supported yet", field)
	}
	var err error
	if d.UserData, err = pick(f.user, f.userB64, field+".userDataBase64"); err != nil {
		return Data{}, err
	}
	if d.NetworkData, err = pick(f.network, f.networkB64, field+".networkDataBase64"); err != nil {
		return Data{}, err
	}
	return d, nil
}

func pick(plain, b64, field string) (string, error) {
	if plain != "" || b64 == "" {
		return plain, nil
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	return string(b), nil
}

// files maps the ISO's paths to their content. An empty network data file would tell cloud-init
// to configure no network at all, so there is none without network data.
func (d Data) files() map[string]string {
	files := map[string]string{d.Kind.MetaData: d.MetaData, d.Kind.UserData: d.UserData}
	if d.NetworkData != "" {
		files[d.Kind.NetworkData] = d.NetworkData
	}
	return files
}

// WriteISO writes data as an ISO labelled after its kind to path, replacing it atomically.
func WriteISO(ctx context.Context, path string, data Data) error {
	if err := isoimage.WriteFiles(ctx, path, data.Kind.Label, data.files()); err != nil {
		return fmt.Errorf("cloud-init ISO: %w", err)
	}
	return nil
}
