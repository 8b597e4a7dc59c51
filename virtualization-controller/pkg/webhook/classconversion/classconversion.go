// Package classconversion is the conversion webhook of VirtualMachineClass: the apiserver sends
// a ConversionReview, and each object is converted between v1alpha2 and v1alpha3 by the pure
// functions of api/core/conversion.
package classconversion

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/d8virt/api/core/conversion"
	"github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha3"
)

// Path is where the webhook server serves the handler.
const Path = "/convert-virtualmachineclass"

// maxBody bounds a ConversionReview (the apiserver sends at most a list's page of objects).
const maxBody = 32 << 20

// Handler serves ConversionReviews.
type Handler struct {
	log logr.Logger
}

// NewHandler logs failed conversions to log.
func NewHandler(log logr.Logger) *Handler { return &Handler{log: log} }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "want POST", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		http.Error(w, fmt.Sprintf("read ConversionReview: %v (at most %d bytes)", err, maxBody), http.StatusBadRequest)
		return
	}
	var review apiextensionsv1.ConversionReview
	if err := utiljson.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("decode ConversionReview: %v", err), http.StatusBadRequest)
		return
	}
	resp := Review(review.Request)
	if resp.Result.Status != metav1.StatusSuccess {
		h.log.Info("conversion failed", "uid", resp.UID, "desiredAPIVersion", review.Request.DesiredAPIVersion, "message", resp.Result.Message)
	}
	out := apiextensionsv1.ConversionReview{TypeMeta: review.TypeMeta, Response: resp}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// Review converts every object of req to its desired version; one that fails fails the review,
// naming it.
func Review(req *apiextensionsv1.ConversionRequest) *apiextensionsv1.ConversionResponse {
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for i, obj := range req.Objects {
		raw, err := Convert(obj.Raw, req.DesiredAPIVersion)
		if err != nil {
			return &apiextensionsv1.ConversionResponse{UID: req.UID, Result: metav1.Status{
				Status: metav1.StatusFailure, Message: fmt.Sprintf("objects[%d]: %v", i, err),
			}}
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: raw})
	}
	return resp
}

// Convert converts one VirtualMachineClass in JSON to desired (an apiVersion). Only what the
// versions write differently changes (apiVersion, the core fractions of each sizing policy, and
// the annotation that carries what v1alpha2 cannot hold); every other field stays exactly as it
// came, so no empty field a Go type would add appears in the apiserver's objects. JSON is read
// case-sensitively, as the apiserver reads it.
func Convert(raw []byte, desired string) ([]byte, error) {
	var tm metav1.TypeMeta
	if err := utiljson.Unmarshal(raw, &tm); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if tm.Kind != "VirtualMachineClass" {
		return nil, fmt.Errorf("kind %q: only VirtualMachineClass is converted", tm.Kind)
	}
	v2, v3 := v1alpha2.SchemeGroupVersion.String(), v1alpha3.SchemeGroupVersion.String()
	if desired != v2 && desired != v3 {
		return nil, fmt.Errorf("desired apiVersion %q: want %s or %s", desired, v2, v3)
	}
	if tm.APIVersion == desired {
		return raw, nil
	}
	var typed any
	switch tm.APIVersion {
	case v2:
		in := &v1alpha2.VirtualMachineClass{}
		if err := utiljson.Unmarshal(raw, in); err != nil {
			return nil, fmt.Errorf("decode %s: %w", v2, err)
		}
		out, err := conversion.ClassToV1alpha3(in)
		if err != nil {
			return nil, fmt.Errorf("%s to %s: %w", v2, v3, err)
		}
		typed = out
	case v3:
		in := &v1alpha3.VirtualMachineClass{}
		if err := utiljson.Unmarshal(raw, in); err != nil {
			return nil, fmt.Errorf("decode %s: %w", v3, err)
		}
		out, err := conversion.ClassToV1alpha2(in)
		if err != nil {
			return nil, fmt.Errorf("%s to %s: %w", v3, v2, err)
		}
		typed = out
	default:
		return nil, fmt.Errorf("apiVersion %q: want %s or %s", tm.APIVersion, v2, v3)
	}
	return merge(raw, typed, desired)
}

// merge is raw with the fields the conversion changes taken from converted.
func merge(raw []byte, converted any, apiVersion string) ([]byte, error) {
	var obj, conv map[string]any
	if err := utiljson.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	b, err := json.Marshal(converted)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	if err := utiljson.Unmarshal(b, &conv); err != nil {
		return nil, fmt.Errorf("decode converted: %w", err)
	}
	obj["apiVersion"] = apiVersion
	if md, ok := obj["metadata"].(map[string]any); ok {
		copyKey(md, object(conv["metadata"]), "annotations")
	}
	spec, convSpec := object(obj["spec"]), object(conv["spec"])
	policies, _ := spec["sizingPolicies"].([]any)
	convPolicies, _ := convSpec["sizingPolicies"].([]any)
	for i := range policies {
		p, ok := policies[i].(map[string]any)
		if !ok || i >= len(convPolicies) {
			continue
		}
		for _, k := range []string{"coreFractions", "defaultCoreFraction"} {
			copyKey(p, object(convPolicies[i]), k)
		}
	}
	return json.Marshal(obj)
}

func object(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// copyKey sets dst[k] to src[k], or deletes it when src has none.
func copyKey(dst, src map[string]any, k string) {
	if v, ok := src[k]; ok {
		dst[k] = v
		return
	}
	delete(dst, k)
}
