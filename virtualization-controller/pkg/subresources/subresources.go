// Package subresources is virtualization-controller's client of virtualization-api
// (subresources.virtualization.deckhouse.io/v1alpha2): the friendly VirtualMachine's addvolume
// and removevolume, called as the controller's own identity, so the cluster authorizes it as it
// would a user (RBAC update on virtualmachines/addvolume) and virtualization-api checks the VM.
package subresources

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// GroupVersion is virtualization-api's.
var GroupVersion = schema.GroupVersion{Group: "subresources.virtualization.deckhouse.io", Version: "v1alpha2"}

// Client calls the subresources of friendly VirtualMachines.
type Client struct {
	rest rest.Interface
}

// New makes a Client from cfg (the controller's, through its rewriter: the group is not renamed).
func New(cfg *rest.Config) (*Client, error) {
	c := rest.CopyConfig(cfg)
	c.APIPath = "/apis"
	c.GroupVersion = &GroupVersion
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("client of %s: %w", GroupVersion, err)
	}
	return &Client{rest: rc}, nil
}

// AddVolume hot-plugs a volume into the running VM namespace/name. A refusal is the API's Status
// (apierrors.APIStatus).
func (c *Client) AddVolume(ctx context.Context, namespace, name string, opts *kubevirtv1.AddVolumeOptions) error {
	return c.put(ctx, namespace, name, "addvolume", opts)
}

// RemoveVolume unplugs a hot-plugged volume from the running VM namespace/name.
func (c *Client) RemoveVolume(ctx context.Context, namespace, name string, opts *kubevirtv1.RemoveVolumeOptions) error {
	return c.put(ctx, namespace, name, "removevolume", opts)
}

func (c *Client) put(ctx context.Context, namespace, name, sub string, body any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("%s of VirtualMachine %s/%s: %w", sub, namespace, name, err)
	}
	err = c.rest.Put().Namespace(namespace).Resource("virtualmachines").Name(name).SubResource(sub).
		SetHeader("Content-Type", "application/json").Body(data).Do(ctx).Error()
	if err != nil {
		return fmt.Errorf("%s of VirtualMachine %s/%s: %w", sub, namespace, name, err)
	}
	return nil
}
