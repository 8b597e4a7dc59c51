// Package kubeget reads one object that may not exist.
package kubeget

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Optional reads key into obj: obj, or nil when it is not found; other errors name the type and key.
func Optional[T client.Object](ctx context.Context, c client.Reader, key types.NamespacedName, obj T) (T, error) {
	var zero T
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return zero, nil
		}
		return zero, fmt.Errorf("get %T %s: %w", obj, key, err)
	}
	return obj, nil
}
