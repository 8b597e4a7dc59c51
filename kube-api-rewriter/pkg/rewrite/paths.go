package rewrite

import (
	"net/http"
	"net/url"
	"strings"
)

// PathKind classifies an API path.
type PathKind uint8

const (
	// PathOther is any non-API path (/healthz, /version, /openapi/v2 ...).
	PathOther PathKind = iota
	// PathLegacyRoot is /api.
	PathLegacyRoot
	// PathRoot is /apis (APIGroupList or aggregated discovery).
	PathRoot
	// PathGroup is /apis/GROUP (APIGroup).
	PathGroup
	// PathGroupVersion is /apis/GROUP/VERSION or /api/v1 (APIResourceList).
	PathGroupVersion
	// PathResource is a resource collection or object, with or without subresource.
	PathResource
)

// RequestInfo is what an API path says. Group is "" for the core group.
type RequestInfo struct {
	Kind        PathKind
	Group       string
	Version     string
	Namespace   string
	Resource    string
	Name        string
	Subresource string // may contain '/' (e.g. "proxy/some/path")
	Watch       bool   // deprecated "/watch/" path segment
	// Verb is the Kubernetes verb (get, list, watch, create, update, patch, delete,
	// deletecollection, or other), set by ParseRequest only.
	Verb string
}

// ParseRequest classifies a request as the apiserver's request-info parsing does: the path as
// ParsePath, and the verb from the method, the "/watch/" path segment and the watch parameter.
// It is the one place that decides what is a watch.
func ParseRequest(method string, u *url.URL) RequestInfo {
	ri := ParsePath(u.Path)
	ri.Verb = verbOf(method, ri, u.RawQuery)
	return ri
}

func verbOf(method string, ri RequestInfo, rawQuery string) string {
	collection := ri.Kind == PathResource && ri.Name == ""
	switch method {
	case http.MethodGet, http.MethodHead:
		switch {
		case ri.Watch && ri.Kind == PathResource:
			return "watch"
		case collection && ri.Subresource == "" && watchParam(rawQuery):
			return "watch"
		case collection:
			return "list"
		}
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if collection {
			return "deletecollection"
		}
		return "delete"
	}
	return "other"
}

// watchParam reports whether a query asks for a watch: its first watch parameter is there and is
// neither "false" nor "0" (in any case), as the apiserver converts a query parameter to a bool.
// An empty value is a watch. Pairs that do not parse are left out, as req.URL.Query() does.
func watchParam(rawQuery string) bool {
	if !strings.Contains(rawQuery, "atch") && !strings.Contains(rawQuery, "%") {
		return false
	}
	q, _ := url.ParseQuery(rawQuery)
	vs := q["watch"]
	return len(vs) > 0 && vs[0] != "0" && !strings.EqualFold(vs[0], "false")
}

var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// ParsePath classifies an API path. It never fails: unknown paths are PathOther.
func ParsePath(p string) RequestInfo {
	var ri RequestInfo
	ri, _ = parsePath(p)
	return ri
}

// pathIdx holds the segment indexes of the parts of a path (-1 when absent).
type pathIdx struct{ group, resource, name int }

func parsePath(p string) (RequestInfo, pathIdx) {
	ix := pathIdx{-1, -1, -1}
	var ri RequestInfo
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if len(segs) > 0 && segs[len(segs)-1] == "" {
		segs = segs[:len(segs)-1]
	}
	if len(segs) == 0 || !strings.HasPrefix(p, "/") {
		return ri, ix
	}
	var rest []string
	off := 0
	switch segs[0] {
	case "api":
		if len(segs) == 1 {
			ri.Kind = PathLegacyRoot
			return ri, ix
		}
		ri.Version = segs[1]
		rest, off = segs[2:], 2
	case "apis":
		if len(segs) == 1 {
			ri.Kind = PathRoot
			return ri, ix
		}
		ri.Group, ix.group = segs[1], 1
		if len(segs) == 2 {
			ri.Kind = PathGroup
			return ri, ix
		}
		ri.Version = segs[2]
		rest, off = segs[3:], 3
	default:
		return ri, ix
	}
	if len(rest) == 0 {
		ri.Kind = PathGroupVersion
		return ri, ix
	}
	ri.Kind = PathResource
	if rest[0] == "watch" {
		ri.Watch = true
		rest, off = rest[1:], off+1
		if len(rest) == 0 {
			ri.Kind = PathGroupVersion
			return ri, ix
		}
	}
	if rest[0] == "namespaces" && len(rest) > 2 && !namespaceSubresources[rest[2]] {
		ri.Namespace = rest[1]
		rest, off = rest[2:], off+2
	}
	ri.Resource, ix.resource = rest[0], off
	if len(rest) > 1 {
		ri.Name, ix.name = rest[1], off+1
	}
	if len(rest) > 2 {
		ri.Subresource = strings.Join(rest[2:], "/")
	}
	return ri, ix
}

// Path rewrites an URL path (without query): the group of /apis/GROUP/...,
// the resource, and the names of CRDs (plural.group) and APIServices
// (version.group). subresources and non-API paths are untouched.
func (rw *Rewriter) Path(d Direction, p string) (string, bool) {
	ri, ix := parsePath(p)
	if ri.Kind == PathOther || ri.Kind == PathLegacyRoot || ri.Kind == PathRoot {
		return p, false
	}
	segs := strings.Split(p, "/") // segs[0] == "" so indexes shift by one
	changed := false
	set := func(i int, v string) {
		segs[i+1] = v
		changed = true
	}
	if ix.group >= 0 {
		if ng, ok := rw.rules.Group(d, ri.Group); ok {
			set(ix.group, ng)
		}
	}
	if ix.resource >= 0 {
		if nr, ok := rw.rules.Resource(d, ri.Group, ri.Resource); ok {
			set(ix.resource, nr)
		}
	}
	if ix.name >= 0 {
		switch {
		case ri.Group == "apiextensions.k8s.io" && ri.Resource == "customresourcedefinitions":
			if nn, ok := rw.crdName(d, ri.Name); ok {
				set(ix.name, nn)
			}
		case ri.Group == "apiregistration.k8s.io" && ri.Resource == "apiservices":
			w := &walker{rw: rw, dir: d}
			if nn, ok := w.rewriteString(rAPIServiceName, ri.Name, nil, nil); ok {
				set(ix.name, nn)
			}
		}
	}
	if !changed {
		return p, false
	}
	return strings.Join(segs, "/"), true
}

// Query rewrites the labelSelector and fieldSelector parameters of a raw query
// string; other parameters are kept byte for byte. ri gives the resource the
// field selector applies to (CRD names in metadata.name, for example).
func (rw *Rewriter) Query(d Direction, ri RequestInfo, rawQuery string) (string, error) {
	if rawQuery == "" || !(strings.Contains(rawQuery, "labelSelector") || strings.Contains(rawQuery, "fieldSelector")) {
		return rawQuery, nil
	}
	parts := strings.Split(rawQuery, "&")
	changed := false
	for i, part := range parts {
		k, v, _ := strings.Cut(part, "=")
		key, err := url.QueryUnescape(k)
		if err != nil || (key != "labelSelector" && key != "fieldSelector") {
			continue
		}
		val, err := url.QueryUnescape(v)
		if err != nil {
			return "", errorf("query parameter %s: %v", key, err)
		}
		var nv string
		if key == "labelSelector" {
			nv, err = rw.LabelSelector(d, val)
		} else {
			nv, err = rw.FieldSelector(d, ri, val)
		}
		if err != nil {
			return "", err
		}
		if nv != val {
			parts[i] = k + "=" + url.QueryEscape(nv)
			changed = true
		}
	}
	if !changed {
		return rawQuery, nil
	}
	return strings.Join(parts, "&"), nil
}

// nativeKinds maps "group/resource" of built-in resources to their kind.
var nativeKinds = map[string]string{
	"/pods": "Pod", "/podtemplates": "PodTemplate", "/services": "Service",
	"/persistentvolumeclaims": "PersistentVolumeClaim", "/events": "Event",
	"/replicationcontrollers":                "ReplicationController",
	"apps/deployments":                       "Deployment",
	"apps/statefulsets":                      "StatefulSet",
	"apps/daemonsets":                        "DaemonSet",
	"apps/replicasets":                       "ReplicaSet",
	"apps/controllerrevisions":               "ControllerRevision",
	"batch/jobs":                             "Job",
	"batch/cronjobs":                         "CronJob",
	"policy/poddisruptionbudgets":            "PodDisruptionBudget",
	"rbac.authorization.k8s.io/roles":        "Role",
	"rbac.authorization.k8s.io/clusterroles": "ClusterRole",
	"admissionregistration.k8s.io/validatingwebhookconfigurations":   "ValidatingWebhookConfiguration",
	"admissionregistration.k8s.io/mutatingwebhookconfigurations":     "MutatingWebhookConfiguration",
	"admissionregistration.k8s.io/validatingadmissionpolicies":       "ValidatingAdmissionPolicy",
	"admissionregistration.k8s.io/validatingadmissionpolicybindings": "ValidatingAdmissionPolicyBinding",
	"admissionregistration.k8s.io/mutatingadmissionpolicies":         "MutatingAdmissionPolicy",
	"admissionregistration.k8s.io/mutatingadmissionpolicybindings":   "MutatingAdmissionPolicyBinding",
	"apiregistration.k8s.io/apiservices":                             "APIService",
	"apiextensions.k8s.io/customresourcedefinitions":                 "CustomResourceDefinition",
	"events.k8s.io/events":                                           "Event",
	"monitoring.coreos.com/servicemonitors":                          "ServiceMonitor",
	"monitoring.coreos.com/podmonitors":                              "PodMonitor",
}

// KnownResource reports whether the component-view resource of group is one the rules rename or
// one of the built-in resources the engine rewrites.
func (rw *Rewriter) KnownResource(group, resource string) bool {
	if _, ok := nativeKinds[group+"/"+resource]; ok {
		return true
	}
	return rw.rules.LookupResource(Rename, group, resource) != nil
}

// TargetFor returns the kind a request body or response for ri is about, in
// the view of direction d's input: for Rename ri is a component-view path, for
// Restore a cluster-view path. Only the main resource and the status
// subresource have a known kind.
func (rw *Rewriter) TargetFor(d Direction, ri RequestInfo) Target {
	if ri.Kind != PathResource || (ri.Subresource != "" && ri.Subresource != "status") {
		return Target{}
	}
	if kr := rw.rules.LookupResource(d, ri.Group, ri.Resource); kr != nil {
		return Target{Group: ri.Group, Kind: kr.From(d).Kind}
	}
	if k, ok := nativeKinds[ri.Group+"/"+ri.Resource]; ok {
		return Target{Group: ri.Group, Kind: k}
	}
	return Target{}
}
