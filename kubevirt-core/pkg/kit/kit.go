// Package kit holds the small helpers the reconcilers of virt-controller, virt-handler and
// virt-operator share, so that each states only what is its own.
package kit

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Get reads the object of type T at key through r. An object that does not exist is no error:
// Get returns nil and nil then, since for a level-based reconciler absence is a state like any
// other. Other errors are r's, unwrapped.
func Get[T any, P interface {
	*T
	client.Object
}](ctx context.Context, r client.Reader, key client.ObjectKey) (P, error) {
	obj := P(new(T))
	if err := r.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return obj, nil
}
