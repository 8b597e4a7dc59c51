package rewrite

import (
	"net/url"
	"testing"
)

// TestParseRequestVerb holds the verb to the apiserver's request-info parsing: what is a watch is
// decided here and nowhere else.
func TestParseRequestVerb(t *testing.T) {
	for _, tc := range []struct{ method, target, want string }{
		{"GET", "/apis/kubevirt.io/v1/namespaces/ns/virtualmachines?watch=true", "watch"},
		{"GET", "/apis/kubevirt.io/v1/namespaces/ns/virtualmachines?watch=True", "watch"},
		{"GET", "/apis/kubevirt.io/v1/namespaces/ns/virtualmachines?watch=yes", "watch"},
		{"GET", "/apis/kubevirt.io/v1/namespaces/ns/virtualmachines?watch=1", "watch"},
		{"GET", "/apis/kubevirt.io/v1/namespaces/ns/virtualmachines?watch=", "watch"},
		{"GET", "/apis/kubevirt.io/v1/namespaces/ns/virtualmachines?watch", "watch"},
		{"GET", "/apis/kubevirt.io/v1/namespaces/ns/virtualmachines?%77atch=on", "watch"},
		{"GET", "/apis/kubevirt.io/v1/namespaces/ns/virtualmachines?watch=true&watch=false", "watch"},
		{"GET", "/apis/kubevirt.io/v1/namespaces/ns/virtualmachines?watch=false&watch=true", "list"},
		{"GET", "/apis/kubevirt.io/v1/namespaces/ns/virtualmachines?watch=FALSE", "list"},
		{"GET", "/apis/kubevirt.io/v1/namespaces/ns/virtualmachines?watch=0", "list"},
		{"GET", "/apis/kubevirt.io/v1/namespaces/ns/virtualmachines?watcher=true", "list"},
		{"GET", "/apis/kubevirt.io/v1/namespaces/ns/virtualmachines", "list"},
		{"GET", "/apis/kubevirt.io/v1/watch/namespaces/ns/virtualmachines", "watch"},
		{"GET", "/apis/kubevirt.io/v1/watch/namespaces/ns/virtualmachines/vm", "watch"},
		{"GET", "/api/v1/watch/pods", "watch"},
		{"GET", "/api/v1/watch/namespaces/ns/pods?watch=false", "watch"},
		// A named object is a get whatever the parameter says.
		{"GET", "/apis/kubevirt.io/v1/namespaces/ns/virtualmachines/vm?watch=true", "get"},
		{"GET", "/api/v1/namespaces/ns/pods/p/log?watch=true", "get"},
		{"HEAD", "/api/v1/pods?watch=true", "watch"},
		{"GET", "/apis?watch=true", "get"},
		{"POST", "/api/v1/namespaces/ns/pods?watch=true", "create"},
		{"PUT", "/api/v1/namespaces/ns/pods/p", "update"},
		{"PATCH", "/api/v1/namespaces/ns/pods/p", "patch"},
		{"DELETE", "/api/v1/namespaces/ns/pods/p", "delete"},
		{"DELETE", "/api/v1/namespaces/ns/pods", "deletecollection"},
		{"OPTIONS", "/api/v1/pods", "other"},
	} {
		u, err := url.Parse(tc.target)
		if err != nil {
			t.Fatal(err)
		}
		if got := ParseRequest(tc.method, u).Verb; got != tc.want {
			t.Errorf("%s %s: verb %q, want %q", tc.method, tc.target, got, tc.want)
		}
	}
}
