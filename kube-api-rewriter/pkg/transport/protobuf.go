package transport

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
)

const protobufContentType = "application/vnd.kubernetes.protobuf"

// protobufToJSON turns a protobuf request body of a built-in kind into JSON, so that typed
// clients, which send built-in kinds as protobuf by default, work through the rewriter. Custom
// resources are never protobuf.
func protobufToJSON(body []byte) ([]byte, error) {
	obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if runtime.IsNotRegisteredError(err) {
		// Well-formed, but of a kind the rewriter cannot read: the client must send JSON (415),
		// its request is not malformed (400).
		return nil, fmt.Errorf("%w: protobuf body: %v", rewrite.ErrUnsupportedContentType, err)
	}
	if err != nil {
		return nil, fmt.Errorf("decode protobuf body: %w", err)
	}
	obj.GetObjectKind().SetGroupVersionKind(*gvk)
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s as JSON: %w", gvk.Kind, err)
	}
	return out, nil
}
