package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// expectVMIEvents waits until controller (the events' reportingController) has recorded, about
// the VMI (by UID, so a later VMI of the same name does not count), an event of each reason in
// want; an entry "A|B" is met by either. The events are read through c's client, as a KubeVirt
// user reads them, across the rewriter.
func expectVMIEvents(t *testing.T, kc client.Client, vmi *kubevirtv1.VirtualMachineInstance, controller string, want ...string) {
	t.Helper()
	eventually(t, 30*time.Second, controller+" events about VMI "+vmi.Name, func(ctx context.Context) error {
		var list eventsv1.EventList
		if err := kc.List(ctx, &list, client.InNamespace(vmi.Namespace)); err != nil {
			return err
		}
		seen := map[string]bool{}
		var got []string
		for _, e := range list.Items {
			if e.Regarding.UID == vmi.UID && e.ReportingController == controller {
				seen[e.Reason] = true
				got = append(got, e.Reason+": "+e.Note)
			}
		}
	wanted:
		for _, w := range want {
			for _, reason := range strings.Split(w, "|") {
				if seen[reason] {
					continue wanted
				}
			}
			return fmt.Errorf("no %s event; got %q", w, got)
		}
		return nil
	})
}
