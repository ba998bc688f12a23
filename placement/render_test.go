package placement

import (
	"testing"
)

// TestRender writes a new Deployment as a team's file would hold it, and reads it back through
// sanitize as the same object.
func TestRender(t *testing.T) {
	obj := map[string]any{
		"status": map[string]any{"replicas": int64(1)},
		"spec": map[string]any{
			"replicas": int64(2),
			"template": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"image": "nginx:1.25", "name": "web", "args": []any{"--port", "80"},
					"env": []any{map[string]any{"value": "true", "name": "DEBUG"}}},
			}}},
		},
		"kind":       "Deployment",
		"apiVersion": "apps/v1",
		"metadata": map[string]any{
			"annotations": map[string]any{"note": "two\nlines\n", "empty": ""},
			"labels":      map[string]any{"app": "web", "tier": "on"},
			"namespace":   "shop",
			"name":        "web",
			"finalizers":  []any{},
		},
	}
	want := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels:
    app: web
    tier: "on"
  annotations:
    empty: ""
    note: |
      two
      lines
  finalizers: []
spec:
  replicas: 2
  template:
    spec:
      containers:
      - name: web
        args:
        - --port
        - "80"
        env:
        - name: DEBUG
          value: "true"
        image: nginx:1.25
status:
  replicas: 1
`
	got, err := Render(obj)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if back := objects(t, got)[0]; !equal(back, obj) {
		t.Errorf("reads back as %v", back)
	}
}
