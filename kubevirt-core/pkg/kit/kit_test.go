package kit

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestGet(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "here"}, Data: map[string]string{"k": "v"}}).
		Build()
	ctx := context.Background()

	cm, err := Get[corev1.ConfigMap](ctx, c, client.ObjectKey{Namespace: "ns", Name: "here"})
	if err != nil || cm == nil || cm.Data["k"] != "v" {
		t.Errorf("existing object: %v, %v", cm, err)
	}
	cm, err = Get[corev1.ConfigMap](ctx, c, client.ObjectKey{Namespace: "ns", Name: "gone"})
	if err != nil || cm != nil {
		t.Errorf("missing object: %v, %v", cm, err)
	}

	boom := errors.New("boom")
	failing := interceptor.NewClient(c, interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return boom
		},
	})
	if cm, err := Get[corev1.ConfigMap](ctx, failing, client.ObjectKey{Namespace: "ns", Name: "here"}); !errors.Is(err, boom) || cm != nil {
		t.Errorf("failing reader: %v, %v", cm, err)
	}
}
