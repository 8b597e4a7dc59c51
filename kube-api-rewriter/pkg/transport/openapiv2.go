package transport

import (
	"fmt"
	"strings"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
)

// openAPIV2ProtobufType is what client-go's discovery asks /openapi/v2 for.
const openAPIV2ProtobufType = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"

// wantsProtobuf reports whether an Accept header asks for the protobuf OpenAPI v2 document
// before JSON: the engine restores JSON, and encodes it back for such a client.
func wantsProtobuf(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt := strings.TrimSpace(strings.SplitN(part, ";", 2)[0])
		switch {
		case strings.Contains(mt, "protobuf"):
			return true
		case mt == "application/json", mt == "*/*":
			return false
		}
	}
	return false
}

// openAPIV2Protobuf encodes a restored OpenAPI v2 document as client-go reads it.
func openAPIV2Protobuf(doc []byte, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	d, err := openapiv2.ParseDocument(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi v2 document: %w", err)
	}
	b, err := proto.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("openapi v2 document: %w", err)
	}
	return b, nil
}
