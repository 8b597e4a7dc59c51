package gen

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// quantityPattern is the pattern Kubernetes publishes for resource.Quantity; upstream CRDs carry it
// on every quantity so that the apiserver rejects "1 Gi" before any controller sees it.
const quantityPattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`

// special maps types whose JSON form is not their Go structure (custom marshalling) to the schema
// Kubernetes documents for them. Keyed by "package path.Name".
var special = map[string]func() apiextv1.JSONSchemaProps{
	"k8s.io/apimachinery/pkg/apis/meta/v1.Time":      dateTime,
	"k8s.io/apimachinery/pkg/apis/meta/v1.MicroTime": dateTime,
	"k8s.io/apimachinery/pkg/apis/meta/v1.Duration":  func() apiextv1.JSONSchemaProps { return apiextv1.JSONSchemaProps{Type: "string"} },
	// ObjectMeta is validated by the apiserver itself, so upstream only says "object"; nested
	// template metadata gets preserve-unknown-fields from its field markers.
	"k8s.io/apimachinery/pkg/apis/meta/v1.ObjectMeta": func() apiextv1.JSONSchemaProps { return apiextv1.JSONSchemaProps{Type: "object"} },
	"k8s.io/apimachinery/pkg/api/resource.Quantity": func() apiextv1.JSONSchemaProps {
		s := intOrString()
		s.Pattern = quantityPattern
		return s
	},
	"k8s.io/apimachinery/pkg/util/intstr.IntOrString": intOrString,
	"k8s.io/apimachinery/pkg/runtime.RawExtension": func() apiextv1.JSONSchemaProps {
		return apiextv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}
	},
	"encoding/json.RawMessage":                                      anyValue,
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSON": anyValue,
}

func dateTime() apiextv1.JSONSchemaProps {
	return apiextv1.JSONSchemaProps{Type: "string", Format: "date-time"}
}

func intOrString() apiextv1.JSONSchemaProps {
	return apiextv1.JSONSchemaProps{
		AnyOf:        []apiextv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}},
		XIntOrString: true,
	}
}

func anyValue() apiextv1.JSONSchemaProps {
	return apiextv1.JSONSchemaProps{XPreserveUnknownFields: ptr(true)}
}

func ptr[T any](v T) *T { return &v }

// builder turns Go types into structural OpenAPI v3 schemas by reflection, following the
// encoding/json rules the types are serialized with and the markers in their comments.
type builder struct {
	docs *docIndex
	// visiting guards against recursive types, which a structural schema cannot express.
	visiting map[reflect.Type]bool
}

func newBuilder() *builder {
	return &builder{docs: newDocIndex(), visiting: map[reflect.Type]bool{}}
}

func typeKey(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }

// schema returns the schema of t with the description of t's own doc comment.
func (b *builder) schema(t reflect.Type) (apiextv1.JSONSchemaProps, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if f, ok := special[typeKey(t)]; ok {
		return f(), nil
	}
	var docs typeDocs
	if t.Name() != "" {
		var err error
		if docs, err = b.docs.lookup(t.PkgPath(), t.Name()); err != nil {
			return apiextv1.JSONSchemaProps{}, err
		}
	}
	s, err := b.shape(t, docs)
	if err != nil {
		return s, fmt.Errorf("%s: %w", t, err)
	}
	s.Description = docs.doc.text
	if err := applyMarkers(&s, docs.doc.markers, nil); err != nil {
		return s, fmt.Errorf("%s: %w", t, err)
	}
	return s, nil
}

// shape builds the schema of t by kind, without t's own description.
func (b *builder) shape(t reflect.Type, docs typeDocs) (apiextv1.JSONSchemaProps, error) {
	switch t.Kind() {
	case reflect.Bool:
		return apiextv1.JSONSchemaProps{Type: "boolean"}, nil
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16:
		return apiextv1.JSONSchemaProps{Type: "integer", Format: "int32"}, nil
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		return apiextv1.JSONSchemaProps{Type: "integer", Format: "int64"}, nil
	case reflect.Float32, reflect.Float64:
		return apiextv1.JSONSchemaProps{Type: "number"}, nil
	case reflect.String:
		return apiextv1.JSONSchemaProps{Type: "string"}, nil
	case reflect.Interface:
		return anyValue(), nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			// encoding/json writes []byte as base64.
			return apiextv1.JSONSchemaProps{Type: "string", Format: "byte"}, nil
		}
		items, err := b.schema(t.Elem())
		if err != nil {
			return items, err
		}
		return apiextv1.JSONSchemaProps{Type: "array", Items: &apiextv1.JSONSchemaPropsOrArray{Schema: &items}}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return apiextv1.JSONSchemaProps{}, fmt.Errorf("map key %s is not a string", t.Key())
		}
		values, err := b.schema(t.Elem())
		if err != nil {
			return values, err
		}
		return apiextv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextv1.JSONSchemaPropsOrBool{Allows: true, Schema: &values}}, nil
	case reflect.Struct:
		if b.visiting[t] {
			return apiextv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}, nil
		}
		b.visiting[t] = true
		defer delete(b.visiting, t)
		s := apiextv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{}}
		if err := b.addFields(&s, t, docs); err != nil {
			return s, err
		}
		if len(s.Properties) == 0 {
			s.Properties = nil
		}
		return s, nil
	}
	return apiextv1.JSONSchemaProps{}, fmt.Errorf("unsupported kind %s", t.Kind())
}

// addFields adds the JSON fields of struct t to s, flattening inlined and embedded structs as
// encoding/json does.
func (b *builder) addFields(s *apiextv1.JSONSchemaProps, t reflect.Type, docs typeDocs) error {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				inner, err := b.docs.lookup(et.PkgPath(), et.Name())
				if err != nil {
					return err
				}
				if err := b.addFields(s, et, inner); err != nil {
					return fmt.Errorf("inline %s: %w", f.Name, err)
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fs, err := b.schema(f.Type)
		if err != nil {
			return fmt.Errorf("field %s: %w", f.Name, err)
		}
		fc := docs.fields[f.Name]
		if fc.text != "" {
			fs.Description = fc.text
		}
		omit := hasTag && (strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,"))
		required := !omit
		if err := applyMarkers(&fs, fc.markers, &required); err != nil {
			return fmt.Errorf("field %s: %w", f.Name, err)
		}
		s.Properties[name] = fs
		if required {
			s.Required = append(s.Required, name)
		}
	}
	return nil
}

// applyMarkers applies the kubebuilder and openapi-gen markers KubeVirt and Kubernetes put on
// types and fields. required is nil for type-level markers. Unknown markers (deepcopy, client,
// patch strategy ...) do not affect the schema and are skipped.
func applyMarkers(s *apiextv1.JSONSchemaProps, markers []string, required *bool) error {
	for _, m := range markers {
		name, value, _ := strings.Cut(m, "=")
		name = strings.TrimSuffix(name, ":") // "MaxItems:=256" is the same as "MaxItems=256"
		// A CEL rule's arguments follow the marker name after a colon, not an equals sign.
		if rest, ok := strings.CutPrefix(m, "kubebuilder:validation:XValidation:"); ok {
			name, value = "kubebuilder:validation:XValidation", rest
		}
		var err error
		switch name {
		case "optional", "kubebuilder:validation:Optional":
			if required != nil {
				*required = false
			}
		case "kubebuilder:validation:Required":
			if required != nil {
				*required = true
			}
		case "nullable":
			s.Nullable = true
		case "kubebuilder:pruning:PreserveUnknownFields":
			s.XPreserveUnknownFields = ptr(true)
		case "listType":
			s.XListType = &value
		case "listMapKey":
			s.XListMapKeys = append(s.XListMapKeys, value)
		case "mapType", "structType":
			s.XMapType = &value
		case "kubebuilder:validation:MaxItems":
			s.MaxItems, err = parseInt(value)
		case "kubebuilder:validation:MinItems":
			s.MinItems, err = parseInt(value)
		case "kubebuilder:validation:MaxLength":
			s.MaxLength, err = parseInt(value)
		case "kubebuilder:validation:MinLength":
			s.MinLength, err = parseInt(value)
		case "kubebuilder:validation:Minimum":
			s.Minimum, err = parseFloat(value)
		case "kubebuilder:validation:Maximum":
			s.Maximum, err = parseFloat(value)
		case "kubebuilder:validation:Pattern":
			s.Pattern = unquote(value)
		case "kubebuilder:validation:Format":
			s.Format = unquote(value)
		case "kubebuilder:validation:Enum":
			for v := range strings.SplitSeq(value, ";") {
				s.Enum = append(s.Enum, apiextv1.JSON{Raw: jsonValue(v)})
			}
		case "kubebuilder:default":
			s.Default = &apiextv1.JSON{Raw: jsonValue(value)}
		case "kubebuilder:validation:XValidation":
			var rule apiextv1.ValidationRule
			if rule, err = parseXValidation(value); err == nil {
				s.XValidations = append(s.XValidations, rule)
			}
		}
		if err != nil {
			return fmt.Errorf("marker +%s: %w", m, err)
		}
	}
	return nil
}

func parseInt(v string) (*int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("not an integer: %w", err)
	}
	return &n, nil
}

func parseFloat(v string) (*float64, error) {
	n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return nil, fmt.Errorf("not a number: %w", err)
	}
	return &n, nil
}

// unquote strips the backquotes or double quotes markers may put around a string value.
func unquote(v string) string {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && v[0] == '`' && v[len(v)-1] == '`' {
		return v[1 : len(v)-1]
	}
	if s, err := strconv.Unquote(v); err == nil {
		return s
	}
	return v
}

// jsonValue reads a marker value as JSON when it is JSON (a number, true, "quoted") and as a bare
// string otherwise, which is how controller-gen reads enum and default values.
func jsonValue(v string) []byte {
	v = strings.TrimSpace(v)
	if json.Valid([]byte(v)) {
		return []byte(v)
	}
	raw, _ := json.Marshal(v)
	return raw
}

// parseXValidation reads `rule="...",message="..."` into a CEL validation rule.
func parseXValidation(v string) (apiextv1.ValidationRule, error) {
	var r apiextv1.ValidationRule
	rest := strings.TrimSpace(v)
	for rest != "" {
		key, after, ok := strings.Cut(rest, "=")
		if !ok {
			return r, fmt.Errorf("expected key=value in %q", rest)
		}
		quoted, err := strconv.QuotedPrefix(after)
		if err != nil {
			return r, fmt.Errorf("value of %s: %w", key, err)
		}
		val, _ := strconv.Unquote(quoted)
		switch strings.TrimSpace(key) {
		case "rule":
			r.Rule = val
		case "message":
			r.Message = val
		case "messageExpression":
			r.MessageExpression = val
		case "reason":
			r.Reason = (*apiextv1.FieldValueErrorReason)(&val)
		case "fieldPath":
			r.FieldPath = val
		}
		rest = strings.TrimLeft(strings.TrimSpace(after[len(quoted):]), ",")
		rest = strings.TrimSpace(rest)
	}
	if r.Rule == "" {
		return r, fmt.Errorf("no rule in %q", v)
	}
	return r, nil
}
