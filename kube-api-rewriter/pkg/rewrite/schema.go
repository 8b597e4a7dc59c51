package rewrite

import (
	"maps"
	"slices"
)

// This file describes where names live in Kubernetes objects. Only places that
// can hold a renamed name are described; everything else is copied verbatim.

func str(r role) *node             { return &node{kind: kString, role: r} }
func arr(e *node) *node            { return &node{kind: kArray, elem: e} }
func obj(f map[string]*node) *node { return &node{kind: kObject, fields: f} }

type schemas struct {
	generic     *node            // any object: metadata and list items
	items       *node            // list items
	byKind      map[string]*node // native kinds (and meta kinds) -> schema
	groups      map[string]map[string]bool
	metadata    *node
	event       *node // watch event
	jsonPatchOp *node
}

func buildSchemas() *schemas {
	labels := &node{kind: kMap, role: rMetaKey, labels: true, elem: str(rLabelValue)}
	annotations := &node{kind: kMap, role: rMetaKey}
	keyList := arr(str(rMetaKey))
	typeRef := func(groupField string) *node {
		return &node{kind: kObject, pGroup: groupField, fields: map[string]*node{
			groupField: groupFieldNode(groupField),
			"kind":     str(rKind),
		}}
	}
	ownerRef := typeRef("apiVersion")
	managedField := obj(map[string]*node{
		"apiVersion": str(rAPIVersion),
		"fieldsV1":   {kind: kCustom, custom: (*walker).fieldsSet},
	})
	metadata := obj(map[string]*node{
		"labels":          labels,
		"annotations":     annotations,
		"finalizers":      keyList,
		"ownerReferences": arr(ownerRef),
		"managedFields":   arr(managedField),
	})
	req := &node{kind: kObject, pKey: "key", fields: map[string]*node{
		"key":    str(rMetaKey),
		"values": arr(str(rLabelValue)),
	}}
	selector := obj(map[string]*node{
		"matchLabels":      labels,
		"matchExpressions": arr(req),
	})
	nodeTerm := obj(map[string]*node{"matchExpressions": arr(req)})
	podAffinityTerm := obj(map[string]*node{
		"labelSelector":     selector,
		"namespaceSelector": selector,
		"topologyKey":       str(rMetaKey),
		"matchLabelKeys":    keyList,
		"mismatchLabelKeys": keyList,
	})
	podAff := obj(map[string]*node{
		"requiredDuringSchedulingIgnoredDuringExecution":  arr(podAffinityTerm),
		"preferredDuringSchedulingIgnoredDuringExecution": arr(obj(map[string]*node{"podAffinityTerm": podAffinityTerm})),
	})
	affinity := obj(map[string]*node{
		"nodeAffinity": obj(map[string]*node{
			"requiredDuringSchedulingIgnoredDuringExecution":  obj(map[string]*node{"nodeSelectorTerms": arr(nodeTerm)}),
			"preferredDuringSchedulingIgnoredDuringExecution": arr(obj(map[string]*node{"preference": nodeTerm})),
		}),
		"podAffinity":     podAff,
		"podAntiAffinity": podAff,
	})
	podSpec := obj(map[string]*node{
		"nodeSelector": labels,
		"affinity":     affinity,
		"topologySpreadConstraints": arr(obj(map[string]*node{
			"labelSelector":  selector,
			"topologyKey":    str(rMetaKey),
			"matchLabelKeys": keyList,
		})),
	})
	podTemplate := obj(map[string]*node{"metadata": metadata, "spec": podSpec})
	pvcSpec := obj(map[string]*node{
		"dataSource":    typeRef("apiGroup"),
		"dataSourceRef": typeRef("apiGroup"),
		"selector":      selector,
	})
	workloadSpec := obj(map[string]*node{
		"selector": selector,
		"template": podTemplate,
		"volumeClaimTemplates": arr(obj(map[string]*node{
			"metadata": metadata, "spec": pvcSpec,
		})),
	})
	objRef := typeRef("apiVersion")
	rule := &node{kind: kObject, pGroups: "apiGroups", fields: map[string]*node{
		"apiGroups": arr(str(rGroup)),
		"resources": arr(str(rRBACResource)),
	}}
	matchResources := obj(map[string]*node{
		"namespaceSelector":    selector,
		"objectSelector":       selector,
		"resourceRules":        arr(rule),
		"excludeResourceRules": arr(rule),
	})
	webhook := obj(map[string]*node{
		"rules":             arr(rule),
		"objectSelector":    selector,
		"namespaceSelector": selector,
		"clientConfig": obj(map[string]*node{
			"service": obj(map[string]*node{"path": str(rWebhookPath)}),
		}),
	})
	names := &node{kind: kObject, pKind: "kind", pRes: "plural", ctxFallback: true, fields: map[string]*node{
		"plural":     {kind: kString, role: rResource, ctxFallback: true},
		"singular":   {kind: kString, role: rResource, ctxFallback: true},
		"kind":       {kind: kString, role: rKind, ctxFallback: true},
		"listKind":   {kind: kString, role: rKind, ctxFallback: true},
		"shortNames": arr(&node{kind: kString, role: rShortName, ctxFallback: true}),
		"categories": {kind: kCustom, custom: (*walker).categories},
	}}
	gvk := &node{kind: kObject, pGroup: "group", ctxFallback: true, fields: map[string]*node{
		"group": str(rGroup),
		"kind":  {kind: kString, role: rKind, ctxFallback: true},
	}}
	gvr := &node{kind: kObject, pGroup: "group", fields: map[string]*node{
		"group":    str(rGroup),
		"resource": str(rResource),
	}}
	top := &node{kind: kTop}
	statusDetails := &node{kind: kObject, pGroup: "group", fields: map[string]*node{
		"group": str(rGroup),
		"kind":  str(rKindOrRes),
		// name: an object name, or a CRD's (plural.group); field: a path that may hold a key
		// (.metadata.labels.kubevirt.io/x, a server-side apply conflict).
		"name": str(rMessage),
		"causes": arr(obj(map[string]*node{
			"message": str(rMessage), "field": str(rMessage), "reason": str(rMessage),
		})),
	}}
	status := map[string]*node{"message": str(rMessage), "reason": str(rMessage), "details": statusDetails}

	// discovery
	groupVersion := obj(map[string]*node{"groupVersion": str(rAPIVersion)})
	apiGroup := map[string]*node{
		"name":             str(rCtxGroup),
		"versions":         arr(groupVersion),
		"preferredVersion": groupVersion,
	}
	apiResource := &node{kind: kObject, pRes: "name", pKind: "kind", pGroup: "group", ctxFallback: true, fields: map[string]*node{
		"name":         {kind: kString, role: rResource, ctxFallback: true},
		"singularName": {kind: kString, role: rResource, ctxFallback: true},
		"kind":         {kind: kString, role: rKind, ctxFallback: true},
		"group":        str(rGroup),
		"shortNames":   arr(&node{kind: kString, role: rShortName, ctxFallback: true}),
		"categories":   {kind: kCustom, custom: (*walker).categories},
	}}
	resourceDiscovery := &node{kind: kObject, pRes: "resource", ctxFallback: true, fields: map[string]*node{
		"resource":         {kind: kString, role: rResource, ctxFallback: true},
		"singularResource": {kind: kString, role: rResource, ctxFallback: true},
		"responseKind":     gvk,
		"shortNames":       arr(&node{kind: kString, role: rShortName, ctxFallback: true}),
		"categories":       {kind: kCustom, custom: (*walker).categories},
		"subresources":     arr(obj(map[string]*node{"responseKind": gvk})),
	}}

	s := &schemas{byKind: map[string]*node{}, groups: map[string]map[string]bool{}, metadata: metadata}
	s.items = &node{kind: kArray, filter: true, elem: &node{kind: kCustom, custom: func(w *walker, _ *node, _ *sib) {
		if w.peek() == '{' {
			w.listItem()
			return
		}
		w.skip()
	}}}
	base := map[string]*node{"metadata": metadata}
	s.generic = obj(base)
	add := func(groups []string, kinds []string, f map[string]*node) {
		m := maps.Clone(base)
		maps.Copy(m, f)
		n := obj(m)
		for _, k := range kinds {
			s.byKind[k] = n
			if s.groups[k] == nil {
				s.groups[k] = map[string]bool{}
			}
			for _, g := range groups {
				s.groups[k][g] = true
			}
		}
	}
	add([]string{""}, []string{"Pod"}, map[string]*node{"spec": podSpec})
	add([]string{""}, []string{"PodTemplate"}, map[string]*node{"template": podTemplate})
	add([]string{"", "apps", "batch"}, []string{"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "ReplicationController"},
		map[string]*node{"spec": workloadSpec})
	add([]string{"batch"}, []string{"CronJob"}, map[string]*node{"spec": obj(map[string]*node{
		"jobTemplate": obj(map[string]*node{"metadata": metadata, "spec": workloadSpec}),
	})})
	add([]string{""}, []string{"Service"}, map[string]*node{"spec": obj(map[string]*node{"selector": labels})})
	add([]string{"policy"}, []string{"PodDisruptionBudget"}, map[string]*node{"spec": obj(map[string]*node{"selector": selector})})
	add([]string{"monitoring.coreos.com"}, []string{"ServiceMonitor", "PodMonitor"}, map[string]*node{"spec": obj(map[string]*node{
		"selector":        selector,
		"podTargetLabels": keyList,
		"targetLabels":    keyList,
	})})
	add([]string{""}, []string{"PersistentVolumeClaim"}, map[string]*node{"spec": pvcSpec})
	add([]string{"", "events.k8s.io"}, []string{"Event"}, map[string]*node{
		"involvedObject": objRef, "regarding": objRef, "related": objRef,
	})
	add([]string{"rbac.authorization.k8s.io"}, []string{"Role", "ClusterRole"}, map[string]*node{
		"rules":           arr(rule),
		"aggregationRule": obj(map[string]*node{"clusterRoleSelectors": arr(selector)}),
	})
	// Access reviews ask about resources by group and name: a component asks about kubevirt.io, the
	// apiserver's authorizer knows the renamed names. SelfSubjectRulesReview answers with rules.
	add([]string{"authorization.k8s.io"}, []string{"SubjectAccessReview", "LocalSubjectAccessReview", "SelfSubjectAccessReview"}, map[string]*node{
		"spec": obj(map[string]*node{"resourceAttributes": gvr}),
	})
	add([]string{"authorization.k8s.io"}, []string{"SelfSubjectRulesReview"}, map[string]*node{
		"status": obj(map[string]*node{"resourceRules": arr(rule)}),
	})
	add([]string{"admissionregistration.k8s.io"}, []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"},
		map[string]*node{"webhooks": arr(webhook)})
	add([]string{"admissionregistration.k8s.io"}, []string{"ValidatingAdmissionPolicy", "MutatingAdmissionPolicy"},
		map[string]*node{"spec": obj(map[string]*node{"matchConstraints": matchResources, "paramKind": typeRef("apiVersion")})})
	add([]string{"admissionregistration.k8s.io"}, []string{"ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicyBinding"},
		map[string]*node{"spec": obj(map[string]*node{
			"matchResources": matchResources,
			"paramRef":       obj(map[string]*node{"selector": selector}),
		})})
	apiSvcMeta := obj(maps.Clone(metadata.fields))
	apiSvcMeta.fields["name"] = str(rAPIServiceName)
	add([]string{"apiregistration.k8s.io"}, []string{"APIService"}, map[string]*node{
		"metadata": apiSvcMeta,
		"spec":     obj(map[string]*node{"group": str(rGroup)}),
	})
	crdMeta := obj(maps.Clone(metadata.fields))
	crdMeta.fields["name"] = str(rCRDName)
	add([]string{"apiextensions.k8s.io"}, []string{"CustomResourceDefinition"}, map[string]*node{
		"metadata": crdMeta,
		"spec":     obj(map[string]*node{"group": str(rCtxGroup), "names": names}),
		"status":   obj(map[string]*node{"acceptedNames": names}),
	})
	add([]string{"apps"}, []string{"ControllerRevision"}, map[string]*node{"data": top})
	add([]string{"", "meta.k8s.io"}, []string{"Status"}, status)
	add([]string{"meta.k8s.io"}, []string{"Table"}, map[string]*node{
		"rows": arr(obj(map[string]*node{"object": top})),
	})
	add([]string{"admission.k8s.io"}, []string{"AdmissionReview"}, map[string]*node{
		"request": obj(map[string]*node{
			"kind": gvk, "requestKind": gvk, "resource": gvr, "requestResource": gvr,
			"object": top, "oldObject": top,
		}),
		"response": obj(map[string]*node{
			"patch":  {kind: kCustom, custom: (*walker).admissionPatch},
			"status": obj(status),
		}),
	})
	// discovery
	add([]string{""}, []string{"APIGroupList"}, map[string]*node{"groups": {kind: kArray, filter: true, elem: obj(apiGroup)}})
	add([]string{""}, []string{"APIGroup"}, apiGroup)
	add([]string{""}, []string{"APIResourceList"}, map[string]*node{
		"groupVersion": str(rCtxGroupVer),
		"resources":    arr(apiResource),
	})
	add([]string{"apidiscovery.k8s.io"}, []string{"APIGroupDiscovery"}, map[string]*node{
		"metadata": obj(map[string]*node{"name": str(rCtxGroup)}),
		"versions": arr(obj(map[string]*node{"resources": arr(resourceDiscovery)})),
	})
	s.event = obj(map[string]*node{"object": top})
	s.jsonPatchOp = nil
	seen := map[*node]bool{}
	for _, n := range s.byKind {
		index(n, seen)
	}
	for _, n := range []*node{s.generic, s.items, s.metadata, s.event} {
		index(n, seen)
	}
	return s
}

// index fills names and kids of the object nodes reachable from n, once the schemas are built.
func index(n *node, seen map[*node]bool) {
	if n == nil || seen[n] {
		return
	}
	seen[n] = true
	for _, k := range []string{n.pGroup, n.pGroups, n.pKey, n.pKind, n.pRes} {
		if k != "" && !slices.Contains(n.pkeys, k) {
			n.pkeys = append(n.pkeys, k)
		}
	}
	if n.kind == kObject && len(n.fields) <= 16 {
		for _, k := range slices.Sorted(maps.Keys(n.fields)) {
			n.names = append(n.names, k)
			n.kids = append(n.kids, n.fields[k])
		}
	}
	for _, c := range n.fields {
		index(c, seen)
	}
	index(n.elem, seen)
}

func groupFieldNode(f string) *node {
	if f == "apiVersion" {
		return str(rAPIVersion)
	}
	return str(rGroup)
}

// schemaFor returns the schema of an object of (source-view) group and kind.
func (rw *Rewriter) schemaFor(group, kind string) *node {
	if n, ok := rw.sch.byKind[kind]; ok && rw.sch.groups[kind][group] {
		return n
	}
	return rw.sch.generic
}
