package validation

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxDataSize is the largest total payload a ConfigMap or Secret may carry (1 MiB).
const maxDataSize = 1 * 1024 * 1024

// immutableMsg is the detail real Kubernetes attaches to changes of immutable fields.
const immutableMsg = apivalidation.FieldImmutableErrorMsg

var metadataPath = field.NewPath("metadata")

// NameIsDNS1035Label reports the problems of a name that must be an RFC 1035
// label (Services). It is an apivalidation.ValidateNameFunc.
var NameIsDNS1035Label = apivalidation.NameIsDNS1035Label

// NameIsDNSLabel reports the problems of a name that must be an RFC 1123 label
// (Namespaces). It is an apivalidation.ValidateNameFunc.
var NameIsDNSLabel = apivalidation.NameIsDNSLabel

// NameIsDNSSubdomain reports the problems of a name that must be an RFC 1123
// subdomain (most kinds). It is an apivalidation.ValidateNameFunc.
var NameIsDNSSubdomain = apivalidation.NameIsDNSSubdomain

// NameIsPathSegment reports the problems of a name that only has to be usable
// as a URL path segment (RBAC kinds). It is an apivalidation.ValidateNameFunc.
var NameIsPathSegment = path.ValidatePathSegmentName

// ValidateObjectMetaUpdate checks the generic metadata rules of an update:
// name, namespace, uid and creationTimestamp unchanged, resourceVersion given,
// generation not decreased, no new finalizers once deletion started, plus the
// create-time checks of labels, annotations, owner references and finalizers.
func ValidateObjectMetaUpdate(newMeta, oldMeta *metav1.ObjectMeta, fldPath *field.Path) field.ErrorList {
	allErrs := apivalidation.ValidateObjectMetaUpdate(newMeta, oldMeta, fldPath)
	return append(allErrs, apivalidation.ValidateFinalizers(newMeta.Finalizers, fldPath.Child("finalizers"))...)
}

// metaUpdate validates the metadata of an update at "metadata".
func metaUpdate(newMeta, oldMeta *metav1.ObjectMeta) field.ErrorList {
	return ValidateObjectMetaUpdate(newMeta, oldMeta, metadataPath)
}

// namespacedMeta validates the metadata of a namespaced object at "metadata".
func namespacedMeta(m *metav1.ObjectMeta, nameFn apivalidation.ValidateNameFunc) field.ErrorList {
	return apivalidation.ValidateObjectMeta(m, true, nameFn, metadataPath)
}

// clusterMeta validates the metadata of a cluster-scoped object at "metadata".
func clusterMeta(m *metav1.ObjectMeta, nameFn apivalidation.ValidateNameFunc) field.ErrorList {
	return apivalidation.ValidateObjectMeta(m, false, nameFn, metadataPath)
}

func nonNegative(v int64, p *field.Path) field.ErrorList {
	return apivalidation.ValidateNonnegativeField(v, p)
}

func positive(v int64, p *field.Path) field.ErrorList {
	if v <= 0 {
		return field.ErrorList{field.Invalid(p, v, "must be greater than 0")}
	}
	return nil
}

// invalid is a field.Invalid at p for each message an apimachinery check (validation.IsDNS1123Label, …)
// gave about value.
func invalid(p *field.Path, value any, msgs []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(p, value, msg))
	}
	return errs
}

func dnsLabel(v string, p *field.Path) field.ErrorList {
	return invalid(p, v, validation.IsDNS1123Label(v))
}

func dnsSubdomain(v string, p *field.Path) field.ErrorList {
	return invalid(p, v, validation.IsDNS1123Subdomain(v))
}

func qualifiedName(v string, p *field.Path) field.ErrorList {
	return metav1validation.ValidateLabelName(v, p)
}

func labelValue(v string, p *field.Path) field.ErrorList {
	return invalid(p, v, validation.IsValidLabelValue(v))
}

func portNum(port int32, p *field.Path) field.ErrorList {
	return invalid(p, port, validation.IsValidPortNum(int(port)))
}

func portName(name string, p *field.Path) field.ErrorList {
	return invalid(p, name, validation.IsValidPortName(name))
}

// portNumOrName accepts a port number in 1-65535 or an IANA_SVC_NAME.
func portNumOrName(port intstr.IntOrString, p *field.Path) field.ErrorList {
	switch port.Type {
	case intstr.Int:
		return invalid(p, port.IntValue(), validation.IsValidPortNum(port.IntValue()))
	case intstr.String:
		return portName(port.StrVal, p)
	default:
		return field.ErrorList{field.InternalError(p, fmt.Errorf("unknown type: %v", port.Type))}
	}
}

// oneOf reports Required when v is empty and NotSupported when v is not in valid.
func oneOf[T ~string](v T, p *field.Path, valid ...T) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	return optionalOneOf(v, p, valid...)
}

// optionalOneOf reports NotSupported when v is set and not in valid.
func optionalOneOf[T ~string](v T, p *field.Path, valid ...T) field.ErrorList {
	if v == "" {
		return nil
	}
	for _, ok := range valid {
		if v == ok {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(p, v, valid)}
}

func validIP(ip string, p *field.Path) field.ErrorList {
	return validation.IsValidIPForLegacyField(p, ip, true, nil)
}

func validCIDR(cidr string, p *field.Path) field.ErrorList {
	return validation.IsValidCIDRForLegacyField(p, cidr, true, nil)
}

// immutable reports "field is immutable" when the two values differ semantically.
func immutable(newVal, oldVal any, p *field.Path) field.ErrorList {
	return apivalidation.ValidateImmutableField(newVal, oldVal, p)
}

// setMembers returns the JSON names of the non-nil pointer (or non-empty
// slice) fields of the struct s points to, in declaration order. It counts the
// members of Kubernetes "one of" unions such as VolumeSource or ProbeHandler.
func setMembers(s any) []string {
	v := reflect.ValueOf(s)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	var names []string
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := v.Field(i)
		if (f.Kind() == reflect.Pointer || f.Kind() == reflect.Slice) && !f.IsNil() {
			names = append(names, jsonName(t.Field(i)))
		}
	}
	return names
}

func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	if name, _, _ := strings.Cut(tag, ","); name != "" {
		return name
	}
	return f.Name
}

// sortedKeys returns the keys of m in order, so error lists are deterministic.
func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

// validateLocalDescendingPath checks a relative path that must stay inside
// its parent: not absolute and without ".." elements.
func validateLocalDescendingPath(target string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.HasPrefix(target, "/") {
		errs = append(errs, field.Invalid(p, target, "must be a relative path"))
	}
	for _, item := range strings.Split(target, "/") {
		if item == ".." {
			errs = append(errs, field.Invalid(p, target, "must not contain '..'"))
			break
		}
	}
	return errs
}

// apiequalityDeepEqual compares API values semantically (quantities by value).
func apiequalityDeepEqual(a, b any) bool {
	return apiequality.Semantic.DeepEqual(a, b)
}
