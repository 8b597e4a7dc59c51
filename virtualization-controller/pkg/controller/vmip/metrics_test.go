package vmip

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestPhaseCollector(t *testing.T) {
	w := newWorld(t, "10.66.10.0/24")
	w.create(address("a", "Auto", "", ""))
	w.create(address("s", "Static", "10.66.99.1", ""))
	w.settle()
	want := `
# HELP d8_virtualization_virtualmachineipaddress_status_phase The phase of a VirtualMachineIPAddress: 1 for its phase, 0 for the others.
# TYPE d8_virtualization_virtualmachineipaddress_status_phase gauge
d8_virtualization_virtualmachineipaddress_status_phase{name="a",namespace="ns",phase="Attached"} 0
d8_virtualization_virtualmachineipaddress_status_phase{name="a",namespace="ns",phase="Bound"} 1
d8_virtualization_virtualmachineipaddress_status_phase{name="a",namespace="ns",phase="Pending"} 0
d8_virtualization_virtualmachineipaddress_status_phase{name="s",namespace="ns",phase="Attached"} 0
d8_virtualization_virtualmachineipaddress_status_phase{name="s",namespace="ns",phase="Bound"} 0
d8_virtualization_virtualmachineipaddress_status_phase{name="s",namespace="ns",phase="Pending"} 1
# HELP d8_virtualization_virtualmachineipaddresslease_status_phase The phase of a VirtualMachineIPAddressLease: 1 for its phase, 0 for the others.
# TYPE d8_virtualization_virtualmachineipaddresslease_status_phase gauge
d8_virtualization_virtualmachineipaddresslease_status_phase{name="ip-10-66-10-1",phase="Bound"} 1
d8_virtualization_virtualmachineipaddresslease_status_phase{name="ip-10-66-10-1",phase="Released"} 0
`
	if err := testutil.CollectAndCompare(NewPhaseCollector(w.c), strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
