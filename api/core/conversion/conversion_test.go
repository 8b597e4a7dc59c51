package conversion

import (
	"encoding/json"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/randfill"

	"github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha3"
)

func v2Class(annotations map[string]string, policies ...v1alpha2.SizingPolicy) *v1alpha2.VirtualMachineClass {
	return &v1alpha2.VirtualMachineClass{
		TypeMeta:   typeMeta(v1alpha2.SchemeGroupVersion.String()),
		ObjectMeta: metav1.ObjectMeta{Name: "generic", Annotations: annotations},
		Spec:       v1alpha2.VirtualMachineClassSpec{CPU: v1alpha2.CPU{Type: v1alpha2.CPUTypeHost}, SizingPolicies: policies},
	}
}

func v3Class(annotations map[string]string, policies ...v1alpha3.SizingPolicy) *v1alpha3.VirtualMachineClass {
	return &v1alpha3.VirtualMachineClass{
		TypeMeta:   typeMeta(v1alpha3.SchemeGroupVersion.String()),
		ObjectMeta: metav1.ObjectMeta{Name: "generic", Annotations: annotations},
		Spec:       v1alpha3.VirtualMachineClassSpec{CPU: v1alpha2.CPU{Type: v1alpha2.CPUTypeHost}, SizingPolicies: policies},
	}
}

func ints(d *int, ns ...int) v1alpha2.SizingPolicy {
	p := v1alpha2.SizingPolicy{SizingPolicyResources: v1alpha2.SizingPolicyResources{Cores: &v1alpha2.SizingPolicyCores{Min: 1, Max: 4}}}
	for _, n := range ns {
		p.CoreFractions = append(p.CoreFractions, v1alpha2.CoreFractionValue(n))
	}
	if d != nil {
		v := v1alpha2.CoreFractionValue(*d)
		p.DefaultCoreFraction = &v
	}
	return p
}

func strs(d string, ss ...string) v1alpha3.SizingPolicy {
	p := v1alpha3.SizingPolicy{SizingPolicyResources: v1alpha2.SizingPolicyResources{Cores: &v1alpha2.SizingPolicyCores{Min: 1, Max: 4}}}
	for _, s := range ss {
		p.CoreFractions = append(p.CoreFractions, v1alpha3.CoreFractionValue(s))
	}
	if d != "" {
		v := v1alpha3.CoreFractionValue(d)
		p.DefaultCoreFraction = &v
	}
	return p
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestClassConversion(t *testing.T) {
	ten := 10
	cases := []struct {
		name string
		v2   *v1alpha2.VirtualMachineClass
		v3   *v1alpha3.VirtualMachineClass
	}{
		{"no policies", v2Class(nil), v3Class(nil)},
		{"integers are percentages", v2Class(nil, ints(&ten, 5, 10, 100)), v3Class(nil, strs("10%", "5%", "10%", "100%"))},
		{"annotations stay", v2Class(map[string]string{"a": "b"}, ints(nil, 50)), v3Class(map[string]string{"a": "b"}, strs("", "50%"))},
		{
			"a percentage without an exact integer travels in the annotation",
			v2Class(map[string]string{"a": "b", AnnotationCoreFractions: `[{"coreFractions":["05%","50%"],"defaultCoreFraction":null}]`}, ints(nil, 5, 50)),
			v3Class(map[string]string{"a": "b"}, strs("", "05%", "50%")),
		},
		{
			"garbage becomes 0",
			v2Class(map[string]string{AnnotationCoreFractions: `[{"coreFractions":null,"defaultCoreFraction":"half"}]`}, ints(new(int))),
			v3Class(nil, strs("half")),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v3, err := ClassToV1alpha3(tc.v2)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := toJSON(t, v3), toJSON(t, tc.v3); got != want {
				t.Errorf("to v1alpha3:\n got %s\nwant %s", got, want)
			}
			v2, err := ClassToV1alpha2(tc.v3)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := toJSON(t, v2), toJSON(t, tc.v2); got != want {
				t.Errorf("to v1alpha2:\n got %s\nwant %s", got, want)
			}
		})
	}
}

// A v1alpha2 object whose fractions changed after it came from v1alpha3 gets the plain
// percentages: the annotation describes values that are no longer there.
func TestClassConversionStaleAnnotation(t *testing.T) {
	v2, err := ClassToV1alpha2(v3Class(nil, strs("", "05%")))
	if err != nil {
		t.Fatal(err)
	}
	v2.Spec.SizingPolicies[0].CoreFractions[0] = 7
	v3, err := ClassToV1alpha3(v2)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := toJSON(t, v3), toJSON(t, v3Class(nil, strs("", "7%"))); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func TestClassConversionBadAnnotation(t *testing.T) {
	_, err := ClassToV1alpha3(v2Class(map[string]string{AnnotationCoreFractions: "{"}))
	if err == nil {
		t.Fatal("a broken annotation was accepted")
	}
}

// filler makes random objects; quantities, times and managed fields get values that survive JSON,
// and the conversion's reserved annotation is left out.
func filler(data []byte) *randfill.Filler {
	return randfill.NewFromGoFuzz(data).NilChance(0.3).NumElements(0, 3).MaxDepth(10).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(c.Int63n(1<<40), resource.BinarySI)
		},
		func(tm *metav1.Time, c randfill.Continue) {
			*tm = metav1.Unix(c.Int63n(1<<33), 0)
		},
		func(m *metav1.ObjectMeta, c randfill.Continue) {
			c.FillNoCustom(m)
			m.ManagedFields = nil
			m.CreationTimestamp = metav1.Unix(c.Int63n(1<<33), 0)
			m.DeletionTimestamp = nil
			delete(m.Annotations, AnnotationCoreFractions)
		},
		// v1alpha3 fractions: canonical percentages, others with an integer but not canonical,
		// and arbitrary strings.
		func(v *v1alpha3.CoreFractionValue, c randfill.Continue) {
			n := strconv.Itoa(c.Intn(101))
			*v = v1alpha3.CoreFractionValue([]string{n + "%", "0" + n + "%", "+" + n, c.String(6)}[c.Intn(4)])
		},
	)
}

// Any v1alpha2 object converts to v1alpha3 and back to exactly itself.
func FuzzClassRoundTripV1alpha2(f *testing.F) {
	for _, seed := range []string{"", "v1alpha2", "0123456789abcdef0123456789abcdef"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &v1alpha2.VirtualMachineClass{}
		filler(data).Fill(in)
		in.TypeMeta = typeMeta(v1alpha2.SchemeGroupVersion.String())
		mid, err := ClassToV1alpha3(in)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ClassToV1alpha2(mid)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := toJSON(t, back), toJSON(t, in); got != want {
			t.Errorf("round trip through v1alpha3:\n got %s\nwant %s", got, want)
		}
	})
}

// Any v1alpha3 object converts to v1alpha2 and back to exactly itself, fractions without an
// integer form included.
func FuzzClassRoundTripV1alpha3(f *testing.F) {
	for _, seed := range []string{"", "v1alpha3", "fedcba9876543210fedcba9876543210"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &v1alpha3.VirtualMachineClass{}
		fill := filler(data)
		fill.Fill(in)
		in.TypeMeta = typeMeta(v1alpha3.SchemeGroupVersion.String())
		mid, err := ClassToV1alpha2(in)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ClassToV1alpha3(mid)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := toJSON(t, back), toJSON(t, in); got != want {
			t.Errorf("round trip through v1alpha2:\n got %s\nwant %s", got, want)
		}
	})
}
