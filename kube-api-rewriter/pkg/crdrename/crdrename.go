// Package crdrename turns CRDs of the original KubeVirt groups into the renamed CRDs the cluster
// holds: group, names, short names and categories renamed; schemas and printer columns untouched.
package crdrename

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
)

// Stream renames every CRD of a YAML or JSON stream and writes them to w as a YAML stream. A
// document that is not a CRD of a renamed group is an error, so a typo in the input never slips
// into crds/ unrenamed. first tells whether w is still empty (no leading separator).
func Stream(rw *rewrite.Rewriter, r io.Reader, w io.Writer, first bool) (bool, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return first, nil
		} else if err != nil {
			return first, err
		}
		if doc == nil {
			continue
		}
		out, err := One(rw, doc)
		if err != nil {
			return first, err
		}
		if !first {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return first, err
			}
		}
		first = false
		if _, err := w.Write(out); err != nil {
			return first, err
		}
	}
}

// One renames one decoded CRD and returns it as YAML.
func One(rw *rewrite.Rewriter, doc map[string]any) ([]byte, error) {
	if doc["kind"] != "CustomResourceDefinition" {
		return nil, fmt.Errorf("%v is not a CustomResourceDefinition", doc["kind"])
	}
	spec, _ := doc["spec"].(map[string]any)
	group, _ := spec["group"].(string)
	if !rw.Rules().IsOriginalGroup(group) {
		return nil, fmt.Errorf("CRD group %q has no rename rule", group)
	}
	j, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	if j, err = yaml.YAMLToJSON(j); err != nil {
		return nil, err
	}
	renamed, err := rw.Object(rewrite.Rename, j, rewrite.Target{})
	if err != nil {
		return nil, err
	}
	if bytes.Equal(renamed, j) {
		return nil, fmt.Errorf("CRD %v was not renamed", doc["metadata"])
	}
	return yaml.JSONToYAML(renamed)
}
