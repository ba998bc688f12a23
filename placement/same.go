package placement

import (
	"math"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The apiserver rewrites a few values into another form that means the same, so a file and the
// live object can differ in text and not in meaning. same compares values as the apiserver
// means them, and only those rules:
//
//   - numbers by value, whatever their Go type: 1 (int64) is 1.0 (float64);
//   - Kubernetes quantities by value, where the field holds quantities (quantityAt): "0.5" is
//     "500m", "1Gi" is "1073741824", 1 is "1"; a value that is not a quantity compares as is;
//   - a mapping's key whose value is null is as if absent (the apiserver drops nulls).
//
// Nothing else is normalised: an int-or-string "80" is not 80 (the apiserver keeps the form
// given, so the two are a person's change), and strings, bools and list order compare exactly.

// quantityMaps are the fields whose values map names to quantities: resources' limits and
// requests (containers, pods, claims), a pod's overhead, a quota's hard and used, a volume's
// capacity, a node's allocatable, a LimitRange item's max, min, default, defaultRequest and
// maxLimitRequestRatio. A CRD field of the same name holding quantity-like strings compares by
// value too: "1Gi" and "1024Mi" there read as no change.
var quantityMaps = map[string]bool{
	"limits": true, "requests": true, "overhead": true, "hard": true, "used": true,
	"capacity": true, "allocatable": true, "max": true, "min": true, "default": true,
	"defaultRequest": true, "maxLimitRequestRatio": true,
}

// quantityFields are the fields that hold one quantity: an emptyDir's sizeLimit.
var quantityFields = map[string]bool{"sizeLimit": true}

// quantityAt reports whether the scalar at p is a quantity: p's last field is a quantity field,
// or the field before it names a mapping of quantities.
func quantityAt(p Path) bool {
	if len(p) == 0 {
		return false
	}
	last := p[len(p)-1].Field
	if quantityFields[last] {
		return true
	}
	return last != "" && len(p) >= 2 && quantityMaps[p[len(p)-2].Field]
}

// same reports whether a and b mean the same value at path p (see the rules above).
func same(p Path, a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		return ok && sameMaps(p, a, b)
	case []any:
		b, ok := b.([]any)
		return ok && sameLists(p, a, b)
	}
	if quantityAt(p) {
		if qa, ok := quantityOf(a); ok {
			if qb, ok := quantityOf(b); ok {
				return qa.Cmp(qb) == 0
			}
		}
	}
	return sameScalar(a, b)
}

func sameMaps(p Path, a, b map[string]any) bool {
	for k, v := range a {
		if !same(p.field(k), v, b[k]) {
			return false
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok && v != nil {
			return false
		}
	}
	return true
}

func sameLists(p Path, a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !same(p.index(i), a[i], b[i]) {
			return false
		}
	}
	return true
}

// sameScalar compares two scalars, numbers by value.
func sameScalar(a, b any) bool {
	if x, ok := a.(int64); ok {
		if y, ok := b.(int64); ok {
			return x == y // exact beyond 2^53, where float64 is not
		}
	}
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && x == y
	}
	return a == b
}

// number is v as a float64 when v is a number of any Go type an object may hold.
func number(v any) (float64, bool) {
	switch v := v.(type) {
	case int64:
		return float64(v), true
	case int:
		return float64(v), true
	case int32:
		return float64(v), true
	case float64:
		return v, true
	case float32:
		return float64(v), true
	}
	return 0, false
}

// canonical is a scalar with integers as int64 (an integral float64 too): how key values are
// held in a Step and compared as map keys.
func canonical(v any) any {
	f, ok := number(v)
	if !ok {
		return v
	}
	switch x := v.(type) {
	case int64:
		return x
	case int:
		return int64(x)
	case int32:
		return int64(x)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		return int64(f)
	}
	return f
}

// quantityOf reads v, a string or a number, as a quantity.
func quantityOf(v any) (resource.Quantity, bool) {
	var text string
	switch x := v.(type) {
	case string:
		text = x
	case int64:
		text = strconv.FormatInt(x, 10)
	case float64:
		text = strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(text)
	return q, err == nil
}

// field is p with one more step into the field k of a mapping (a new slice: p is never shared).
func (p Path) field(k string) Path {
	return append(p[:len(p):len(p)], Step{Field: k})
}

// item is p with one more step into the item of a list whose field match is value.
func (p Path) item(match string, value any) Path {
	return append(p[:len(p):len(p)], Step{Match: match, Value: value})
}

// index is p with one more step into the list's item at i.
func (p Path) index(i int) Path {
	return append(p[:len(p):len(p)], Step{Index: i})
}
