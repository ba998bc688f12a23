package placement

import (
	"testing"
)

func TestDefaultPersonTellsPeopleFromControllers(t *testing.T) {
	for _, c := range []struct {
		manager, operation, subresource string
		person                          bool
	}{
		{"kubectl-edit", "Update", "", true},
		{"kubectl-set", "Update", "", true},
		{"kubectl-label", "Update", "", true},
		{"kubectl-client-side-apply", "Update", "", true},
		{"kubectl", "Update", "scale", true},
		{"kubectl", "Apply", "", true},
		{"Mozilla", "Update", "", true},
		{"k9s", "Update", "", true},
		{"argocd-server", "Update", "", true},
		{"kubectl-edit", "Update", "status", false},
		{"kube-controller-manager", "Update", "scale", false},
		{"kube-controller-manager", "Update", "", false},
		{"kube-scheduler", "Update", "", false},
		{"kubelet", "Update", "status", false},
		{"kustomize-controller", "Apply", "", false},
		{"helm-controller", "Apply", "", false},
		{"source-controller", "Update", "", false},
		{"argocd-controller", "Apply", "", false},
		{"argocd-application-controller", "Update", "", false},
		{"gitops-reverser", "Apply", "", false},
		{"before-first-apply", "Update", "", false},
	} {
		if got := DefaultPerson(c.manager, c.operation, c.subresource); got != c.person {
			t.Errorf("DefaultPerson(%q, %q, %q) = %t, want %t", c.manager, c.operation, c.subresource, got, c.person)
		}
	}
}

func TestOwnersWithoutFieldSetsAreNotKnown(t *testing.T) {
	everyone := func(string, string, string) bool { return true }
	for name, managed := range map[string][]any{
		"none": nil,
		// The watch's decoder skips fieldsV1: the entries it leaves tell nothing.
		"no fieldsV1": {map[string]any{"manager": "kubectl-edit", "operation": "Update"}},
	} {
		o := OwnersOf(managed, everyone)
		if o.Known() || o.Person(pathOf("spec")) {
			t.Errorf("%s: Known %t, Person(spec) %t; want neither", name, o.Known(), o.Person(pathOf("spec")))
		}
	}
}

// owners reads the managedFields entries of a YAML list with a policy that makes people of the
// managers given.
func owners(t *testing.T, entries string, people ...string) Owners {
	t.Helper()
	obj := map[string]any{"metadata": map[string]any{}}
	write(t, obj, entries)
	return OwnersOf(managedOf(obj), func(manager, _, _ string) bool {
		for _, p := range people {
			if p == manager {
				return true
			}
		}
		return false
	})
}

func TestPersonOwnsThePathWhatIsBelowAndAtomicValuesAbove(t *testing.T) {
	// kubectl create owns the container's args (an atomic list) and its resources, which were
	// empty then; a VPA later set resources.requests, which makes resources a granular mapping.
	o := owners(t, `
- fieldsV1:
    f:metadata:
      f:finalizers:
        .: {}
        v:"example.com/guard": {}
    f:spec:
      f:template:
        f:spec:
          f:containers:
            k:{"name":"webModel"}:
              .: {}
              f:args: {}
              f:name: {}
              f:ports:
                .: {}
                k:{"containerPort":80,"protocol":"TCP"}:
                  .: {}
                  f:containerPort: {}
                  f:protocol: {}
                k:{bad json: {}
              f:resources: {}
  manager: kubectl-create
  operation: Update
- fieldsV1:
    f:spec:
      f:replicas: {}
      f:template:
        f:spec:
          f:containers:
            k:{"name":"webModel"}:
              f:resources:
                f:requests:
                  f:cpu: {}
  manager: vpa-updater
  operation: Update
`, "kubectl-create")
	if !o.Known() {
		t.Fatal("not Known")
	}
	for p, want := range map[string]bool{
		"spec":                          true, // something below
		"spec.template.spec.containers": true,
		"spec.template.spec.containers[name=webModel]":                              true,
		"spec.template.spec.containers[name=webModel].args":                         true, // the path
		"spec.template.spec.containers[name=webModel].args[0]":                      true, // an atomic value above
		"spec.template.spec.containers[name=webModel].resources":                    true,
		"spec.template.spec.containers[name=webModel].resources.requests.cpu":       false, // set later, by the VPA
		"spec.template.spec.containers[name=webModel].ports[containerPort=80]":      true,  // a key of two fields, matched on one
		"spec.template.spec.containers[name=webModel].ports[containerPort=80].name": false,
		"spec.template.spec.containers[name=webModel].ports[containerPort=81]":      false,
		"spec.template.spec.containers[name=webModel].ports[name=http]":             false, // no object to read the name from
		"spec.template.spec.containers[name=api]":                                   false,
		"spec.replicas":       false,
		"metadata.finalizers": true,
		"status":              false,
	} {
		if got := o.Person(pathOf(p)); got != want {
			t.Errorf("Person(%s) = %t, want %t", p, got, want)
		}
	}
}

func TestPersonMatchesAnIndexOrAValueThroughTheLiveObject(t *testing.T) {
	o := owners(t, `
- fieldsV1:
    f:spec:
      f:hosts:
        v:"b.example.com": {}
      f:rules:
        i:1:
          f:host: {}
  manager: kubectl-edit
  operation: Update
`, "kubectl-edit")
	live := map[string]any{"spec": map[string]any{
		"hosts": []any{"a.example.com", "b.example.com"},
		"rules": []any{map[string]any{"host": "a"}, map[string]any{"host": "b"}},
	}}
	for _, c := range []struct {
		path Path
		want bool
	}{
		{Path{{Field: "spec"}, {Field: "hosts"}, {Index: 1}}, true},
		{Path{{Field: "spec"}, {Field: "hosts"}, {Index: 0}}, false},
		{Path{{Field: "spec"}, {Field: "rules"}, {Index: 1}, {Field: "host"}}, true},
		{Path{{Field: "spec"}, {Field: "rules"}, {Match: "host", Value: "b"}, {Field: "host"}}, true},
		{Path{{Field: "spec"}, {Field: "rules"}, {Match: "host", Value: "a"}, {Field: "host"}}, false},
	} {
		if got := o.personIn(c.path, live); got != c.want {
			t.Errorf("%s: owned %t, want %t", c.path, got, c.want)
		}
	}
	// Without the object, an index still matches; a set's item cannot.
	if !o.Person(pathOf("spec.rules[1].host")) || o.Person(pathOf("spec.hosts[1]")) {
		t.Errorf("Person(spec.rules[1].host) %t, Person(spec.hosts[1]) %t: want true, false",
			o.Person(pathOf("spec.rules[1].host")), o.Person(pathOf("spec.hosts[1]")))
	}
}

func TestOwnersOfWithoutAPolicyUsesDefaultPerson(t *testing.T) {
	f := webModel(t)
	write(t, f.live, scaledByHPA)
	if o := OwnersOf(managedOf(f.live), nil); !o.Known() || o.Person(pathOf("spec.replicas")) {
		t.Errorf("Known %t, Person(spec.replicas) %t: want Known, and the HPA no person", o.Known(), o.Person(pathOf("spec.replicas")))
	}
}
