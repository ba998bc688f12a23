package placement

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Owners says which fields of a live object people set, read from its metadata.managedFields:
// the apiserver records, for every field manager, the set of fields (fieldsV1) its writes set
// or changed. Changes keeps a person's change and drops a controller's by asking Owners; Owned
// prunes a new object to what people set.
//
// Which managers are people is the caller's policy (DefaultPerson is one). What the sets can
// and cannot tell:
//   - An Update (kubectl create, edit, set, label, client-side apply) owns every field it changed,
//     and the apiserver defaults the object before that is counted: a create owns the defaults
//     too (imagePullPolicy, dnsPolicy, …), and an edit that adds a container owns that
//     container's defaults. Only an Apply (server-side apply) owns exactly what it sent.
//   - A mutating webhook's changes are counted to the manager of the request it mutated.
//   - An Update takes the fields it changes from every other manager: after kubectl scale the
//     Flux applier no longer owns spec.replicas, and after an HPA's rescale the person no longer
//     does.
type Owners struct {
	people *fieldSet // the union of the field sets of the managers that are people
	all    *fieldSet // the union of every manager's field set, to tell atomic values (see walk)
	// appliedFromGit: a manager that is not a person server-side applied the object (Flux's
	// kustomize-controller, Argo CD): it sent the file's values, which the apiserver kept as
	// sent or defaulted beside them, and owns them until a person changes one.
	appliedFromGit bool
}

// fieldSet is a node of a field set as fieldsV1 writes it: a tree whose keys are f:<field>,
// k:<the key fields of an associative list's item, as JSON>, v:<a set's item, as JSON>,
// i:<an index> and "." (the node itself is in the set, besides what is below it). An empty
// node is a leaf: the value there is in the set whole (a scalar, an atomic list or mapping, or
// a mapping that was empty when set).
type fieldSet struct {
	leaf    bool // empty: the value here is in the set whole
	self    bool // ".": the value here is in the set, and what is below it as the nodes say
	fields  map[string]*fieldSet
	members map[string]*member // the k:, v: and i: children, by their text
}

// member is a list's item in a field set: an associative list's item by its key fields (k:),
// a set's item by its value (v:), or an item by its index (i:).
type member struct {
	kind  byte           // 'k', 'v' or 'i'
	key   map[string]any // k: the key fields and their values
	value any            // v: the item
	index int            // i: the index
	set   fieldSet
}

// OwnersOf reads the managed fields of a live object: managed is its metadata.managedFields as
// an unstructured object holds them (a []any of maps), taken before sanitize.Object drops them.
// It is the unstructured form, not []metav1.ManagedFieldsEntry, because that is what the caller
// holds and ObjectOf's types are what Changes walks: GetManagedFields would convert every entry
// by reflection and leave fieldsV1 as raw JSON to decode again. person says which managers are
// people; nil is DefaultPerson. Entries without fieldsV1 (a decoder that skipped them, as the
// watch's does) tell nothing and are left out; with none left, Owners is not Known. The sets are
// read once, here: Changes and Owned walk them as they are.
func OwnersOf(managed []any, person func(manager, operation, subresource string) bool) Owners {
	if person == nil {
		person = DefaultPerson
	}
	var o Owners
	for _, e := range managed {
		entry, _ := e.(map[string]any)
		fields, ok := entry["fieldsV1"].(map[string]any)
		if !ok {
			continue
		}
		if o.all == nil {
			o.all, o.people = &fieldSet{}, &fieldSet{}
		}
		o.all.add(fields)
		manager, _ := entry["manager"].(string)
		operation, _ := entry["operation"].(string)
		subresource, _ := entry["subresource"].(string)
		if person(manager, operation, subresource) {
			o.people.add(fields)
		} else if operation == "Apply" {
			o.appliedFromGit = true
		}
	}
	return o
}

// Known reports whether the object had managed fields to read. An object without them (made
// before the apiserver tracked them and not written since, or stripped of them) says nothing of
// who set what.
func (o Owners) Known() bool {
	return o.all != nil
}

// Person reports whether a person owns p: a person's field set holds p, or something below p,
// or an atomic value above p (a leaf that no manager's set goes below). A step by Match matches
// an associative item whose key has the step's Match field with the step's Value (a key of
// several fields, {"containerPort":80,"protocol":"TCP"}, matches on that one field: a port named
// by its name matches nothing), a step by Index the item at that index, and a set's item
// (v:) is never matched: Person has no object to read items from, where Changes and Owned read
// the live object's.
func (o Owners) Person(p Path) bool {
	return o.personIn(p, nil)
}

// personIn is Person reading the list items on p from root: an associative item matches on all
// its key fields, a set's item on its value, an index on the item's place.
func (o Owners) personIn(p Path, root any) bool {
	people, _, whole := o.walk(p, root)
	return whole || len(people) > 0
}

// walk follows p through people's and everyone's field sets, reading list items from root (the
// live object; nil to match list steps by their Match and Value alone). whole is true when a
// person owns an atomic value at or above p: everything below it is theirs. A leaf is atomic
// when no manager's set goes below it; one that some set goes below was a mapping set empty
// (kubectl create's resources: {}), which owns nothing that was put in it later.
func (o Owners) walk(p Path, root any) (people, all []*fieldSet, whole bool) {
	if o.people == nil {
		return nil, nil, false
	}
	people, all, at := []*fieldSet{o.people}, []*fieldSet{o.all}, root
	for _, s := range p {
		if atomic(people, all) {
			return people, all, true
		}
		item, index := resolve(at, s)
		people, all, at = children(people, s, item, index), children(all, s, item, index), item
		if len(people) == 0 {
			return nil, nil, false
		}
	}
	return people, all, atomic(people, all)
}

// atomic reports whether people's nodes hold a leaf that none of all's nodes goes below.
func atomic(people, all []*fieldSet) bool {
	leaf := false
	for _, n := range people {
		leaf = leaf || n.leaf
	}
	if !leaf {
		return false
	}
	for _, n := range all {
		if len(n.fields) > 0 || len(n.members) > 0 {
			return false
		}
	}
	return true
}

// resolve steps from at (a live value, or nil) by s: the value at the field, or the list's item
// that s names and its index (-1 when not found or not a list step).
func resolve(at any, s Step) (any, int) {
	if s.Field != "" {
		m, _ := at.(map[string]any)
		return m[s.Field], -1
	}
	list, _ := at.([]any)
	if s.Match == "" {
		if s.Index >= 0 && s.Index < len(list) {
			return list[s.Index], s.Index
		}
		return nil, -1
	}
	for i, it := range list {
		if obj, ok := it.(map[string]any); ok && sameScalar(canonical(obj[s.Match]), s.Value) {
			return it, i
		}
	}
	return nil, -1
}

// children are the nodes under nodes that step s reaches: the field, or the members that match
// the item (when known, at index) or else the step.
func children(nodes []*fieldSet, s Step, item any, index int) []*fieldSet {
	var out []*fieldSet
	for _, n := range nodes {
		if s.Field != "" {
			if c := n.fields[s.Field]; c != nil {
				out = append(out, c)
			}
			continue
		}
		for _, m := range n.members {
			if m.matches(s, item, index) {
				out = append(out, &m.set)
			}
		}
	}
	return out
}

// matches reports whether m is the list item item (at index; nil and -1 when unknown), or
// else the item step s names.
func (m *member) matches(s Step, item any, index int) bool {
	switch m.kind {
	case 'k':
		if obj, ok := item.(map[string]any); ok {
			return m.keys(obj)
		}
		v, ok := m.key[s.Match]
		return ok && s.Match != "" && sameScalar(v, s.Value)
	case 'v':
		return item != nil && same(nil, m.value, item)
	}
	if index < 0 && s.Field == "" && s.Match == "" {
		index = s.Index
	}
	return m.index == index
}

// keys reports whether obj has every key field of m with its value.
func (m *member) keys(obj map[string]any) bool {
	for k, v := range m.key {
		if !sameScalar(v, canonical(obj[k])) {
			return false
		}
	}
	return true
}

// add puts the field set fields (a fieldsV1 node) into s. A key that cannot be read (not JSON)
// is skipped: it names nothing Changes could step to.
func (s *fieldSet) add(fields map[string]any) {
	if len(fields) == 0 {
		s.leaf = true
		return
	}
	for k, v := range fields {
		below, _ := v.(map[string]any)
		switch {
		case k == ".":
			s.self = true
		case strings.HasPrefix(k, "f:"):
			if s.fields == nil {
				s.fields = map[string]*fieldSet{}
			}
			c := s.fields[k[2:]]
			if c == nil {
				c = &fieldSet{}
				s.fields[k[2:]] = c
			}
			c.add(below)
		case strings.HasPrefix(k, "k:"), strings.HasPrefix(k, "v:"), strings.HasPrefix(k, "i:"):
			if m := s.member(k); m != nil {
				m.set.add(below)
			}
		}
	}
}

// member returns the member of s named text (k:…, v:… or i:…), made on first use; nil when text
// does not parse.
func (s *fieldSet) member(text string) *member {
	if m := s.members[text]; m != nil {
		return m
	}
	m := &member{kind: text[0]}
	var err error
	switch m.kind {
	case 'k':
		var key any
		key, err = decodeJSON(text[2:])
		m.key, _ = key.(map[string]any)
		if err == nil && m.key == nil {
			return nil
		}
	case 'v':
		m.value, err = decodeJSON(text[2:])
	case 'i':
		m.index, err = strconv.Atoi(text[2:])
	}
	if err != nil {
		return nil
	}
	if s.members == nil {
		s.members = map[string]*member{}
	}
	s.members[text] = m
	return m
}

// decodeJSON reads a key or value of a field set with the types objects hold: integers as int64.
func decodeJSON(text string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return numbers(v), nil
}

// numbers replaces the json.Numbers in v by int64 or float64.
func numbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	case map[string]any:
		for k, x := range v {
			v[k] = numbers(x)
		}
	case []any:
		for i, x := range v {
			v[i] = numbers(x)
		}
	}
	return v
}
