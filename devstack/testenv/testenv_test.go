package testenv

import "testing"

func TestDNSLabel(t *testing.T) {
	for in, want := range map[string]string{
		"TestFoo":                   "testfoo",
		"TestFoo/sub_case#01":       "testfoo-sub-case",
		"Test/x_y":                  "test-x-y",
		"///":                       "x",
		"TestAVeryLongNameIndeed42": "testaverylongnam",
	} {
		if got := dnsLabel(in, 16); got != want {
			t.Errorf("dnsLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDecodeCRDs(t *testing.T) {
	docs := []byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: as.x.io}
---
# comment only
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: bs.x.io}
`)
	crds, err := DecodeCRDs(docs)
	if err != nil || len(crds) != 2 || crds[1].Name != "bs.x.io" {
		t.Fatalf("DecodeCRDs = %d CRDs, %v", len(crds), err)
	}
	if _, err := DecodeCRDs([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")); err == nil {
		t.Fatal("a ConfigMap was taken for a CRD")
	}
}
