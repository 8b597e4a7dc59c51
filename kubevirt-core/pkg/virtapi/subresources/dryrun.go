package subresources

import (
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DryRun tells whether the values of a dryRun option ask for a dry run, as Kubernetes reads
// them: none is a real run, "All" (the one value defined) a dry run, anything else a 400 that
// names the field.
func DryRun(values []string) (bool, *apierrors.StatusError) {
	for _, v := range values {
		if v != metav1.DryRunAll {
			return false, apierrors.NewBadRequest(fmt.Sprintf("dryRun: Unsupported value: %q: supported values: %q", v, metav1.DryRunAll))
		}
	}
	return len(values) > 0, nil
}

// requestDryRun reads the dryRun query parameter, which every changing subresource honours
// besides the dryRun of KubeVirt's option bodies (soft reboot, freeze and unfreeze have none).
func requestDryRun(r *http.Request) (bool, *apierrors.StatusError) {
	return DryRun(r.URL.Query()["dryRun"])
}

// dryRunPlan makes plan a dry run when values ask for one; bad values answer before the plan.
func dryRunPlan(values []string, plan func() (Plan, *apierrors.StatusError)) (Plan, *apierrors.StatusError) {
	dry, serr := DryRun(values)
	if serr != nil {
		return Plan{}, serr
	}
	p, serr := plan()
	p.DryRun = p.DryRun || dry
	return p, serr
}
