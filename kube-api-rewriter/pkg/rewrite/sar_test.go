package rewrite

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/d8virt/kube-api-rewriter/pkg/rules"
)

func TestAccessReviews(t *testing.T) {
	rw := New(rules.Default())
	tests := []struct{ name, component, cluster string }{
		{
			name:      "subject access review about a VM",
			component: `{"kind":"SubjectAccessReview","apiVersion":"authorization.k8s.io/v1","spec":{"user":"bob","resourceAttributes":{"namespace":"ns","verb":"get","group":"kubevirt.io","resource":"virtualmachines","subresource":"status"}}}`,
			cluster:   `{"kind":"SubjectAccessReview","apiVersion":"authorization.k8s.io/v1","spec":{"user":"bob","resourceAttributes":{"namespace":"ns","verb":"get","group":"internal.virtualization.deckhouse.io","resource":"internalvirtualizationvirtualmachines","subresource":"status"}}}`,
		},
		{
			name:      "native resources stay",
			component: `{"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","spec":{"resourceAttributes":{"verb":"list","group":"","resource":"pods"}}}`,
			cluster:   `{"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","spec":{"resourceAttributes":{"verb":"list","group":"","resource":"pods"}}}`,
		},
		{
			name:      "rules review answers",
			component: `{"kind":"SelfSubjectRulesReview","apiVersion":"authorization.k8s.io/v1","status":{"resourceRules":[{"verbs":["get"],"apiGroups":["kubevirt.io"],"resources":["virtualmachines","virtualmachineinstances/status"]}]}}`,
			cluster:   `{"kind":"SelfSubjectRulesReview","apiVersion":"authorization.k8s.io/v1","status":{"resourceRules":[{"verbs":["get"],"apiGroups":["internal.virtualization.deckhouse.io"],"resources":["internalvirtualizationvirtualmachines","internalvirtualizationvirtualmachineinstances/status"]}]}}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				d       Direction
				in, out string
			}{{Rename, tc.component, tc.cluster}, {Restore, tc.cluster, tc.component}} {
				got, err := rw.Object(c.d, []byte(c.in), Target{})
				if err != nil {
					t.Fatal(err)
				}
				var a, b any
				_ = json.Unmarshal(got, &a)
				_ = json.Unmarshal([]byte(c.out), &b)
				if !reflect.DeepEqual(a, b) {
					t.Errorf("%s:\n got %s\nwant %s", c.d, got, c.out)
				}
			}
		})
	}
}
