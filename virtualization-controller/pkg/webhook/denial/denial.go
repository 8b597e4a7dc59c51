// Package denial is how the admission webhooks refuse an object: an Invalid Status whose causes
// name the fields, as the apiserver's own validation answers.
package denial

import (
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Invalid denies the object kind/name with errs; no errs allows it.
func Invalid(kind schema.GroupKind, name string, errs field.ErrorList) admission.Response {
	if len(errs) == 0 {
		return admission.Allowed("")
	}
	st := apierrors.NewInvalid(kind, name, errs).ErrStatus
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &st}}
}
