package transport

import (
	"encoding/json"
	"fmt"

	"k8s.io/client-go/kubernetes/scheme"
)

const protobufContentType = "application/vnd.kubernetes.protobuf"

// protobufToJSON turns a protobuf request body of a built-in kind into JSON, so that typed
// clients, which send built-in kinds as protobuf by default, work through the rewriter. Custom
// resources are never protobuf.
func protobufToJSON(body []byte) ([]byte, error) {
	obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
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
