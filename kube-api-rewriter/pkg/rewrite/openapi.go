package rewrite

import (
	"encoding/json"
	"fmt"
	"strings"
)

// OpenAPI v3 is how kubectl explain finds a resource's schema: the root document lists one entry
// per group version ("apis/G/V"), and each group-version document tags its schemas with
// x-kubernetes-group-version-kind. The documents are small and rarely fetched, so they are
// decoded rather than scanned.

// OpenAPIRoot restores the /openapi/v3 index for the component: entries of renamed groups appear
// under their original names, and original groups present in the cluster are hidden.
func (rw *Rewriter) OpenAPIRoot(body []byte) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("openapi v3 root: %w", err)
	}
	var paths map[string]struct {
		ServerRelativeURL string `json:"serverRelativeURL"`
	}
	if err := json.Unmarshal(doc["paths"], &paths); err != nil {
		return nil, fmt.Errorf("openapi v3 root paths: %w", err)
	}
	out := make(map[string]any, len(paths))
	for key, entry := range paths {
		group, version, ok := openAPIGroupVersion(key)
		switch {
		case !ok:
			out[key] = entry
		case rw.rules.IsOriginalGroup(group) && rw.rules.HiddenGroup(group):
			// A stock KubeVirt's group: the component must not see two schemas for one kind.
		default:
			if orig, renamed := rw.rules.Group(Restore, group); renamed && rw.rules.IsRenamedGroup(group) {
				newKey := "apis/" + orig + "/" + version
				entry.ServerRelativeURL = strings.Replace(entry.ServerRelativeURL, "/"+key, "/"+newKey, 1)
				key = newKey
			}
			out[key] = entry
		}
	}
	p, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	doc["paths"] = p
	return json.Marshal(doc)
}

// OpenAPIPath renames a /openapi/v3/apis/G/V path of an original group to the cluster's name.
func (rw *Rewriter) OpenAPIPath(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/openapi/v3/")
	if !ok {
		return path, false
	}
	group, version, ok := openAPIGroupVersion(rest)
	if !ok {
		return path, false
	}
	renamed, ok := rw.rules.Group(Rename, group)
	if !ok {
		return path, false
	}
	return "/openapi/v3/apis/" + renamed + "/" + version, true
}

// OpenAPIDocument restores the group and kind of every x-kubernetes-group-version-kind in a
// group-version document, which is what kubectl explain matches on.
func (rw *Rewriter) OpenAPIDocument(body []byte) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("openapi v3 document: %w", err)
	}
	rw.restoreGVKs(doc)
	// kubectl explain finds a resource by its path, /apis/G/V/namespaces/{namespace}/RESOURCE.
	if paths, ok := doc["paths"].(map[string]any); ok {
		restored := make(map[string]any, len(paths))
		for p, op := range paths {
			np, _ := rw.Path(Restore, p)
			restored[np] = op
		}
		doc["paths"] = restored
	}
	return json.Marshal(doc)
}

// OpenAPIV2 restores the /openapi/v2 document (JSON) for the component, which client-side
// validation and older kubectl explain read: paths of renamed groups appear under their original
// names, every x-kubernetes-group-version-kind is restored, and the paths and definitions of
// hidden original groups present in the cluster (a stock KubeVirt) are dropped, so that no kind
// has two schemas. Definition names stay as the cluster has them: only $refs refer to them.
func (rw *Rewriter) OpenAPIV2(body []byte) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("openapi v2 document: %w", err)
	}
	if defs, ok := doc["definitions"].(map[string]any); ok {
		for name, def := range defs {
			if rw.hiddenGVK(def) {
				delete(defs, name)
			}
		}
	}
	if paths, ok := doc["paths"].(map[string]any); ok {
		restored := make(map[string]any, len(paths))
		for p, op := range paths {
			if ri := ParsePath(p); ri.Group != "" && rw.rules.IsOriginalGroup(ri.Group) && rw.rules.HiddenGroup(ri.Group) {
				continue
			}
			np, _ := rw.Path(Restore, p)
			restored[np] = op
		}
		doc["paths"] = restored
	}
	rw.restoreGVKs(doc)
	return json.Marshal(doc)
}

// hiddenGVK reports whether a schema is tagged with a kind of a hidden original group.
func (rw *Rewriter) hiddenGVK(def any) bool {
	m, _ := def.(map[string]any)
	gvks, _ := m["x-kubernetes-group-version-kind"].([]any)
	for _, g := range gvks {
		if gm, ok := g.(map[string]any); ok {
			if group, _ := gm["group"].(string); rw.rules.IsOriginalGroup(group) && rw.rules.HiddenGroup(group) {
				return true
			}
		}
	}
	return false
}

func (rw *Rewriter) restoreGVKs(v any) {
	switch t := v.(type) {
	case map[string]any:
		// Schemas carry a list of GVKs, operations a single one.
		switch gvk := t["x-kubernetes-group-version-kind"].(type) {
		case []any:
			for _, g := range gvk {
				if m, ok := g.(map[string]any); ok {
					rw.restoreGVK(m)
				}
			}
		case map[string]any:
			rw.restoreGVK(gvk)
		}
		for _, child := range t {
			rw.restoreGVKs(child)
		}
	case []any:
		for _, child := range t {
			rw.restoreGVKs(child)
		}
	}
}

func (rw *Rewriter) restoreGVK(m map[string]any) {
	group, _ := m["group"].(string)
	kind, _ := m["kind"].(string)
	if !rw.rules.IsRenamedGroup(group) {
		return
	}
	if k, ok := rw.rules.Kind(Restore, group, kind); ok {
		m["kind"] = k
	}
	if g, ok := rw.rules.Group(Restore, group); ok {
		m["group"] = g
	}
}

func openAPIGroupVersion(key string) (group, version string, ok bool) {
	rest, ok := strings.CutPrefix(key, "apis/")
	if !ok {
		return "", "", false
	}
	group, version, ok = strings.Cut(rest, "/")
	return group, version, ok && group != "" && version != "" && !strings.Contains(version, "/")
}
