// Package sanitize turns a live Kubernetes object into the bytes we store in Git. The admission
// webhook and the watch both call it, so the same object yields the same bytes (and Hash) on both
// sides no matter which decoder produced the map or which server-owned fields it carried: that is
// what lets a watch event be correlated with the admission request that caused it.
//
// Object removes what the server owns (status, identity, bookkeeping, allocated Service IPs) and
// keeps everything a user declared. YAML renders the result canonically; Hash names those bytes.
package sanitize

// Object returns a sanitized deep copy of obj (an unstructured object's map, as from the dynamic
// client or a decoded admission request), with server-owned fields removed. obj is never modified:
// callers pass objects straight from informer caches. Dropped fields are skipped while copying, so
// a large managedFields or status costs nothing. Values are expected to be JSON-like (maps, []any,
// scalars); any other value is shared, not copied. Object(nil) is nil.
func Object(obj map[string]any) map[string]any {
	if obj == nil {
		return nil
	}
	service := obj["apiVersion"] == "v1" && obj["kind"] == "Service"
	job := obj["apiVersion"] == "batch/v1" && obj["kind"] == "Job"
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		switch k {
		case "status":
			continue
		case "metadata":
			if m, ok := v.(map[string]any); ok {
				out[k] = metadata(m)
				continue
			}
		case "spec":
			if m, ok := v.(map[string]any); ok && service {
				out[k] = serviceSpec(m)
				continue
			}
		}
		out[k] = DeepCopy(v)
	}
	if job {
		dropGeneratedJobFields(out)
	}
	return out
}

// jobUIDLabels are the labels the apiserver derives from a Job's uid and puts on the Job and its
// Pod template. A Job created again gets a new uid, so it cannot carry them.
var jobUIDLabels = []string{"controller-uid", "batch.kubernetes.io/controller-uid"}

// dropGeneratedJobFields removes from a Job (a copy of ours) what the apiserver generated from its
// uid, unless spec.manualSelector says the user chose the selector: the selector and the uid
// labels. Kept, they make the file unrestorable: the apiserver refuses a Job whose selector it
// did not generate ("`selector` not auto-generated").
func dropGeneratedJobFields(job map[string]any) {
	spec, _ := job["spec"].(map[string]any)
	if spec == nil || spec["manualSelector"] == true {
		return
	}
	delete(spec, "selector")
	if template, _ := spec["template"].(map[string]any); template != nil {
		dropJobUIDLabels(template)
	}
	dropJobUIDLabels(job)
}

// dropJobUIDLabels removes jobUIDLabels from the metadata of obj, and labels when none is left.
func dropJobUIDLabels(obj map[string]any) {
	meta, _ := obj["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	if labels == nil {
		return
	}
	for _, k := range jobUIDLabels {
		delete(labels, k)
	}
	if len(labels) == 0 {
		delete(meta, "labels")
	}
}

// metadata copies ObjectMeta without the fields the apiserver or controllers set.
func metadata(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch k {
		case "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
			"deletionGracePeriodSeconds", "managedFields", "selfLink", "ownerReferences":
			continue
		case "annotations": // empty or null maps are dropped: they say nothing
			if a, _ := v.(map[string]any); len(a) > 0 {
				if a = annotations(a); len(a) > 0 {
					out[k] = a
				}
			}
			continue
		case "labels":
			if l, _ := v.(map[string]any); len(l) > 0 {
				out[k] = copyMap(l)
			}
			continue
		}
		out[k] = DeepCopy(v)
	}
	return out
}

// annotations copies a without the annotations tools and controllers write for themselves.
func annotations(a map[string]any) map[string]any {
	out := make(map[string]any, len(a))
	for k, v := range a {
		switch k {
		case "kubectl.kubernetes.io/last-applied-configuration", "deployment.kubernetes.io/revision":
			continue
		}
		out[k] = DeepCopy(v)
	}
	return out
}

// serviceSpec copies a core/v1 Service spec without the IPs the cluster allocated. A headless
// Service's "None" is the user's choice, not an allocation, so it stays.
func serviceSpec(spec map[string]any) map[string]any {
	out := make(map[string]any, len(spec))
	for k, v := range spec {
		switch k {
		case "clusterIP":
			if v != "None" {
				continue
			}
		case "clusterIPs":
			if !allNone(v) {
				continue
			}
		}
		out[k] = DeepCopy(v)
	}
	return out
}

func allNone(v any) bool {
	ips, ok := v.([]any)
	if !ok || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if ip != "None" {
			return false
		}
	}
	return true
}

// DeepCopy deep-copies the containers of a JSON-like value; scalars are immutable and shared.
func DeepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return copyMap(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = DeepCopy(e)
		}
		return out
	default:
		return v
	}
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = DeepCopy(v)
	}
	return out
}
