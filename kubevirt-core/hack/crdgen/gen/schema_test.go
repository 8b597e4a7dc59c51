package gen

import (
	"go/parser"
	"go/token"
	"reflect"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func TestParseComment(t *testing.T) {
	src := `package p

// Widget is a thing.
// It has two lines.
//
// +kubebuilder:pruning:PreserveUnknownFields
// +genclient
type Widget struct {
	// Size of it.
	// +optional
	// +kubebuilder:validation:MaxItems:=4
	Size int
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	c := parseComment(f.Comments[0])
	if c.text != "Widget is a thing.\nIt has two lines." {
		t.Errorf("text = %q", c.text)
	}
	if want := []string{"kubebuilder:pruning:PreserveUnknownFields", "genclient"}; !reflect.DeepEqual(c.markers, want) {
		t.Errorf("markers = %q, want %q", c.markers, want)
	}
	fc := parseComment(f.Comments[1])
	if fc.text != "Size of it." || len(fc.markers) != 2 {
		t.Errorf("field comment = %+v", fc)
	}
}

func TestApplyMarkers(t *testing.T) {
	tests := []struct {
		name     string
		markers  []string
		required bool
		check    func(*apiextv1.JSONSchemaProps) bool
		wantReq  bool
		wantErr  bool
	}{
		{name: "optional", markers: []string{"optional"}, required: true, wantReq: false, check: func(*apiextv1.JSONSchemaProps) bool { return true }},
		{name: "max items with :=", markers: []string{"kubebuilder:validation:MaxItems:=256"}, required: true, wantReq: true,
			check: func(s *apiextv1.JSONSchemaProps) bool { return s.MaxItems != nil && *s.MaxItems == 256 }},
		{name: "quoted enum", markers: []string{`kubebuilder:validation:Enum="kubevirt";"archive"`},
			check: func(s *apiextv1.JSONSchemaProps) bool {
				return len(s.Enum) == 2 && string(s.Enum[0].Raw) == `"kubevirt"` && string(s.Enum[1].Raw) == `"archive"`
			}},
		{name: "bare enum and default", markers: []string{"kubebuilder:validation:Enum=Always;Never", "kubebuilder:default=Stopped"},
			check: func(s *apiextv1.JSONSchemaProps) bool {
				return string(s.Enum[1].Raw) == `"Never"` && string(s.Default.Raw) == `"Stopped"`
			}},
		{name: "pattern in backquotes", markers: []string{"kubebuilder:validation:Pattern=`^(0|1)$`"},
			check: func(s *apiextv1.JSONSchemaProps) bool { return s.Pattern == "^(0|1)$" }},
		{name: "list map", markers: []string{"listType=map", "listMapKey=a", "listMapKey=b"},
			check: func(s *apiextv1.JSONSchemaProps) bool {
				return *s.XListType == "map" && reflect.DeepEqual(s.XListMapKeys, []string{"a", "b"})
			}},
		{name: "CEL rule", markers: []string{`kubebuilder:validation:XValidation:rule="self.all(x, x in ['a', 'b'])", message="Illegal"`},
			check: func(s *apiextv1.JSONSchemaProps) bool {
				return len(s.XValidations) == 1 && s.XValidations[0].Rule == "self.all(x, x in ['a', 'b'])" && s.XValidations[0].Message == "Illegal"
			}},
		{name: "bad integer", markers: []string{"kubebuilder:validation:MinItems=x"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s apiextv1.JSONSchemaProps
			req := tc.required
			err := applyMarkers(&s, tc.markers, &req)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if req != tc.wantReq {
				t.Errorf("required = %v, want %v", req, tc.wantReq)
			}
			if !tc.check(&s) {
				t.Errorf("schema = %+v", s)
			}
		})
	}
}

// TestShapes covers the encoding/json rules the reflection follows, on a local type without docs.
func TestShapes(t *testing.T) {
	type inner struct {
		A string `json:"a"`
	}
	type sample struct {
		inner    `json:",inline"`
		Skip     string            `json:"-"`
		Bytes    []byte            `json:"bytes,omitempty"`
		Labels   map[string]string `json:"labels,omitempty"`
		Ptr      *int32            `json:"ptr,omitempty"`
		Anything any               `json:"anything,omitempty"`
		private  int
	}
	b := newBuilder()
	b.docs.dirFn = func() (map[string]string, error) { return map[string]string{}, nil }
	s, err := b.schema(reflect.TypeOf(sample{}))
	if err != nil {
		t.Fatal(err)
	}
	_ = sample{}.private
	if _, ok := s.Properties["Skip"]; ok || len(s.Properties) != 5 {
		t.Errorf("properties = %v", s.Properties)
	}
	if !reflect.DeepEqual(s.Required, []string{"a"}) {
		t.Errorf("required = %v", s.Required)
	}
	if p := s.Properties["bytes"]; p.Type != "string" || p.Format != "byte" {
		t.Errorf("bytes = %+v", p)
	}
	if p := s.Properties["labels"]; p.AdditionalProperties.Schema.Type != "string" {
		t.Errorf("labels = %+v", p)
	}
	if p := s.Properties["ptr"]; p.Type != "integer" || p.Format != "int32" {
		t.Errorf("ptr = %+v", p)
	}
	if p := s.Properties["anything"]; p.XPreserveUnknownFields == nil || p.Type != "" {
		t.Errorf("anything = %+v", p)
	}
}
