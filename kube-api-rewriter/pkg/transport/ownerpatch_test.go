package transport

import (
	"net/http"
	"testing"
)

// TestJSONPatchOwnerReferenceKind: a JSON patch of an owner reference's kind alone is completed
// from the object the cluster holds, read first with the same request's context.
func TestJSONPatchOwnerReferenceKind(t *testing.T) {
	podC := c(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","ownerReferences":[{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachineInstance","name":"vmi","uid":"1"}]}}`)
	up := &stub{respond: func(req *http.Request) *http.Response {
		return response(req, http.StatusOK, "application/json", podC)
	}}
	rt, _ := newEngine(up)
	patch := `[{"op":"replace","path":"/metadata/ownerReferences/0/kind","value":"VirtualMachine"}]`
	req := newRequest(t, "PATCH", "/api/v1/namespaces/ns/pods/p?fieldManager=m", "application/json-patch+json", []byte(patch))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	calls := up.calls()
	if len(calls) != 2 || calls[0].Method != "GET" || calls[0].Path != "/api/v1/namespaces/ns/pods/p" || calls[0].Query != "" || calls[1].Method != "PATCH" {
		t.Fatalf("upstream saw %+v, want a GET of the pod and the PATCH", calls)
	}
	want := c(`[{"op":"test","path":"/metadata/ownerReferences/0/apiVersion","value":"IG/v1"},{"op":"replace","path":"/metadata/ownerReferences/0/kind","value":"InternalVirtualizationVirtualMachine"}]`)
	if !jsonEqual(t, calls[1].Body, []byte(want)) || calls[1].Query != "fieldManager=m" {
		t.Errorf("forwarded %s?%s, want %s", calls[1].Body, calls[1].Query, want)
	}

	// An object that cannot be read: the patch goes on as it is, the apiserver answers it.
	up.respond = func(req *http.Request) *http.Response {
		return response(req, http.StatusNotFound, "application/json", `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}
	up.reqs = nil
	resp, err = rt.RoundTrip(newRequest(t, "PATCH", "/api/v1/namespaces/ns/pods/gone", "application/json-patch+json", []byte(patch)))
	if err != nil {
		t.Fatal(err)
	}
	if readAll(t, resp); resp.StatusCode != http.StatusNotFound || len(up.calls()) != 2 || !jsonEqual(t, up.calls()[1].Body, []byte(patch)) {
		t.Errorf("status %d, calls %+v", resp.StatusCode, up.calls())
	}
}
