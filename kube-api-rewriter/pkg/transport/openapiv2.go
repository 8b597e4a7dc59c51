package transport

import (
	"fmt"
	"strconv"
	"strings"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
)

// openAPIV2ProtobufType is the protobuf OpenAPI v2 media type the apiserver answers with (clients
// ask for it with "@v1.0" or ".v1.0"; Go's mime package cannot parse the "@" form).
const openAPIV2ProtobufType = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

// wantsProtobuf reports whether an Accept header prefers the protobuf OpenAPI v2 document to JSON,
// as the apiserver negotiates: the highest q wins, the first listed among equals. The engine
// restores JSON, and encodes it back for such a client.
func wantsProtobuf(accept string) bool {
	best, proto := -1.0, false
	for _, part := range strings.Split(accept, ",") {
		params := strings.Split(part, ";")
		mt := strings.ToLower(strings.TrimSpace(params[0]))
		q := 1.0
		for _, p := range params[1:] {
			if v, ok := strings.CutPrefix(strings.TrimSpace(p), "q="); ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					q = f
				}
			}
		}
		isProto := strings.HasPrefix(mt, "application/com.github.proto-openapi.spec.v2") && strings.HasSuffix(mt, "+protobuf")
		if !isProto && mt != "application/json" && mt != "*/*" && mt != "application/*" {
			continue
		}
		if q > best && q > 0 {
			best, proto = q, isProto
		}
	}
	return proto
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
