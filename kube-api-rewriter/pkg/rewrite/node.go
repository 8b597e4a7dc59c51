package rewrite

// This file holds what the walker knows about a place in an object: its node (built by
// schema.go), the role of a string there, and the sibling values a role needs.

// A node describes how the walker treats a JSON value at a known place of an
// object. Values at places without a node are copied through untouched.
type node struct {
	kind   nodeKind
	fields map[string]*node // kObject
	// names and kids are fields as two slices (see index): looking a key up among a few names
	// by length and bytes is cheaper than a map lookup, and the walker does it for every key.
	names  []string
	kids   []*node
	pkeys  []string // the distinct sibling fields among pGroup, pGroups, pKey, pKind, pRes
	elem   *node    // kArray, kMap
	role   role     // kString (and kMap keys)
	labels bool     // kMap: values are label values of the key
	filter bool     // kArray: elements may be hidden (dropped)
	// prescan: sibling fields read before walking a kObject
	pGroup, pKey, pKind, pRes string
	pGroups                   string // string array of groups (RBAC apiGroups)
	// ctxFallback: kinds/resources without a sibling group use the scope group
	ctxFallback bool
	custom      func(w *walker, n *node, sb *sib)
}

type nodeKind uint8

const (
	kRaw nodeKind = iota
	kObject
	kArray
	kMap
	kString
	kTop // a Kubernetes object: apiVersion/kind select the schema
	kCustom
)

type role uint8

const (
	rNone           role = iota
	rMetaKey             // label/annotation/finalizer key
	rLabelValue          // label value, key from sibling "key" or the map key
	rAPIVersion          // group/version; the group part is renamed
	rGroup               // bare API group
	rCtxGroup            // API group that sets the scope group and may hide the scope
	rCtxGroupVer         // group/version that sets the scope group
	rKind                // kind, group from sibling or scope
	rResource            // resource[/sub], group from sibling or scope
	rKindOrRes           // metav1.StatusDetails.kind: a kind or a resource
	rShortName           // short name, group from scope
	rCRDName             // plural.group
	rAPIServiceName      // version.group
	rWebhookPath         // webhook service path
	rMessage             // free text: qualified names are replaced
	rRBACResource        // resource of a policy rule, groups from sibling apiGroups
)

// sib holds sibling values read by prescan.
type sib struct {
	group     string
	hasGroup  bool
	groups    []string
	hasGroups bool
	key       string
	hasKey    bool
	kind      string
	res       string
}
