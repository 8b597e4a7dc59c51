package cli

import (
	"strings"
	"testing"

	"github.com/d8virt/kubevirt-core/pkg/console"
)

// A refused stream says the Status's message and what to do about it.
func TestRefusal(t *testing.T) {
	status := func(msg string) string {
		return `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"` + msg + `"}`
	}
	cases := []struct {
		code      int
		body, sub string
		want      []string
	}{
		{403, status(`User \"u\" cannot get resource \"virtualmachines/console\"`), "console", []string{`console of VirtualMachine prod/web: 403 User "u" cannot get resource "virtualmachines/console"`, "ask for the verb get on virtualmachines/console of subresources.virtualization.deckhouse.io in prod"}},
		{403, status("forbidden"), "portforward/22/tcp", []string{"ask for the verb get on virtualmachines/portforward"}},
		{404, status(`virtualmachines.virtualization.deckhouse.io \"web\" not found`), "console", []string{"not found", "kubectl get vm -n prod lists the VirtualMachines"}},
		{409, status("the console of the VirtualMachine is in use"), "console", []string{"in use", "kubectl get --raw /apis/subresources.virtualization.deckhouse.io/v1alpha2/namespaces/prod/virtualmachines/web/console"}},
		{401, "Unauthorized", "vnc", []string{"401 Unauthorized", "log in again"}},
		{500, "boom", "vnc", []string{"vnc of VirtualMachine prod/web: 500 boom"}},
	}
	for _, c := range cases {
		got := refusal(&console.RefusedError{Code: c.code, Message: c.body}, "prod", "web", c.sub).Error()
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%d %s: %q lacks %q", c.code, c.sub, got, w)
			}
		}
	}
}
