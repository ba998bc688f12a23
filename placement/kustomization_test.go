package placement

import (
	"bytes"
	"strings"
	"testing"
)

// production is apps/production/kustomization.yaml as a team keeps it: a flush-left list, as
// `kustomize edit add resource` writes it, with comments.
const production = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
# Production runs the base podinfo with its own values.
resources:
- ../base/podinfo
# The team's namespace comes first.
- namespace.yaml # owned by platform
patches:
- path: podinfo-values.yaml
  target:
    kind: HelmRelease
`

// base is apps/base/podinfo/kustomization.yaml with an indented list and commented-out items.
const base = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: podinfo
resources:
  - namespace.yaml
  # - old-repository.yaml (until the move is done)
  - release.yaml
  # - disabled.yaml
labels:
  - pairs:
      app: podinfo
`

type kustomizationCase struct {
	name, in, entry, want string
}

func TestAddResource(t *testing.T) {
	for _, c := range []kustomizationCase{
		{"flush-left list", production, "ingress.yaml", strings.Replace(production, "platform\n", "platform\n- ingress.yaml\n", 1)},
		{"indented list, before a trailing comment", base, "repository.yaml", strings.Replace(base, "  - release.yaml\n", "  - release.yaml\n  - repository.yaml\n", 1)},
		{"already listed as ./x", base, "./namespace.yaml", base},
		{"already listed as x/", production, "../base/podinfo/", production},
		{"quoted items: matched by value, added as the last is quoted",
			"resources:\n  - \"./app.yaml\"\n  - 'db.yaml'\n", "cache.yaml",
			"resources:\n  - \"./app.yaml\"\n  - 'db.yaml'\n  - 'cache.yaml'\n"},
		{"quoted item listed", "resources:\n  - \"./app.yaml\"\n", "app.yaml", "resources:\n  - \"./app.yaml\"\n"},
		{"double-quoted last item", "resources:\n- \"a.yaml\"\n", "b.yaml", "resources:\n- \"a.yaml\"\n- \"b.yaml\"\n"},
		{"no resources: the key at the end, indented as the other lists",
			"kind: Kustomization\nnamespace: web\npatches:\n  - path: p.yaml\n", "app.yaml",
			"kind: Kustomization\nnamespace: web\npatches:\n  - path: p.yaml\nresources:\n  - app.yaml\n"},
		{"no resources nor other lists, no final line break",
			"kind: Kustomization\nnamespace: web", "app.yaml",
			"kind: Kustomization\nnamespace: web\nresources:\n- app.yaml\n"},
		{"empty file", "", "app.yaml", "resources:\n- app.yaml\n"},
		{"resources: []", "namespace: web\nresources: []\nimages: []\n", "app.yaml", "namespace: web\nresources:\n- app.yaml\nimages: []\n"},
		{"resources: [] # comment", "resources: [] # none yet\n", "app.yaml", "resources: # none yet\n- app.yaml\n"},
		{"empty resources:", "resources:\nnamespace: web\n", "app.yaml", "resources:\n- app.yaml\nnamespace: web\n"},
		{"resources: ~", "resources: ~\n", "app.yaml", "resources:\n- app.yaml\n"},
		{"flow list", "resources: [a.yaml, \"b.yaml\"] # two\n", "c.yaml", "resources: [a.yaml, \"b.yaml\", \"c.yaml\"] # two\n"},
		{"flow list, plain", "resources: [ a.yaml ]\n", "c.yaml", "resources: [ a.yaml, c.yaml ]\n"},
		{"CRLF", "resources:\r\n  - a.yaml\r\n  # next\r\nnamespace: x\r\n", "b.yaml", "resources:\r\n  - a.yaml\r\n  - b.yaml\r\n  # next\r\nnamespace: x\r\n"},
		{"CRLF, no resources", "namespace: x\r\n", "b.yaml", "namespace: x\r\nresources:\r\n- b.yaml\r\n"},
		{"last line without a line break", "resources:\n- a.yaml", "b.yaml", "resources:\n- a.yaml\n- b.yaml"},
		{"an entry that needs quotes", "resources:\n- a.yaml\n", "- odd: name.yaml", "resources:\n- a.yaml\n- '- odd: name.yaml'\n"},
		{"non-ASCII before a flow list", "resources: [é.yaml]\n", "ü.yaml", "resources: [é.yaml, ü.yaml]\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := AddResource([]byte(c.in), c.entry)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("AddResource(%q) =\n%s\nwant\n%s", c.entry, got, c.want)
			}
			if c.in == c.want && !bytes.Equal(got, []byte(c.in)) {
				t.Error("a no-op changed the bytes")
			}
		})
	}
}

func TestRemoveResource(t *testing.T) {
	for _, c := range []kustomizationCase{
		{"flush-left list, comment above stays", production, "./namespace.yaml", strings.Replace(production, "- namespace.yaml # owned by platform\n", "", 1)},
		{"indented list, comment above stays", base, "release.yaml", strings.Replace(base, "  - release.yaml\n", "", 1)},
		{"absent", base, "old-repository.yaml", base},
		{"quoted entry", "resources:\n  - \"./app.yaml\"\n  - 'db.yaml'\n", "app.yaml", "resources:\n  - 'db.yaml'\n"},
		{"the last entry", "namespace: web\nresources: # all of them\n  # the app\n  - app.yaml\nimages: []\n", "app.yaml", "namespace: web\nresources: [] # all of them\n  # the app\nimages: []\n"},
		{"listed twice", "resources:\n- a.yaml\n- b.yaml\n- ./a.yaml\n", "a.yaml", "resources:\n- b.yaml\n"},
		{"flow, middle", "resources: [a.yaml, 'b.yaml', c.yaml]\n", "b.yaml", "resources: [a.yaml, c.yaml]\n"},
		{"flow, last", "resources: [a.yaml, b.yaml] # two\n", "b.yaml", "resources: [a.yaml] # two\n"},
		{"flow, only", "resources: [a.yaml]\n", "a.yaml", "resources: []\n"},
		{"flow, after escaped quotes", "resources: ['it''s.yaml', \"a\\\"b.yaml\", c.yaml]\n", "c.yaml", "resources: ['it''s.yaml', \"a\\\"b.yaml\"]\n"},
		{"flow, an escaped entry", "resources: ['it''s.yaml', c.yaml]\n", "it's.yaml", "resources: [c.yaml]\n"},
		{"CRLF", "resources:\r\n  - a.yaml\r\n  - b.yaml\r\nnamespace: x\r\n", "a.yaml", "resources:\r\n  - b.yaml\r\nnamespace: x\r\n"},
		{"CRLF, the last entry", "resources:\r\n  - a.yaml\r\n", "a.yaml", "resources: []\r\n"},
		{"last line without a line break", "resources:\n- a.yaml\n- b.yaml", "b.yaml", "resources:\n- a.yaml"},
		{"the last entry without a line break", "resources:\n- a.yaml", "a.yaml", "resources: []"},
		{"no resources", "namespace: web\n", "a.yaml", "namespace: web\n"},
		{"a multi-line item", "resources:\n- \"a very\n  long.yaml\"\n- b.yaml\n", "a very long.yaml", "resources:\n- b.yaml\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := RemoveResource([]byte(c.in), c.entry)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("RemoveResource(%q) =\n%s\nwant\n%s", c.entry, got, c.want)
			}
		})
	}
}

func TestRemoveThenAddTheLastResource(t *testing.T) {
	in := "kind: Kustomization\nresources:\n  - app.yaml\npatches:\n  - path: p.yaml\n"
	empty, err := RemoveResource([]byte(in), "app.yaml")
	if err != nil {
		t.Fatal(err)
	}
	back, err := AddResource(empty, "app.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(back) != in {
		t.Errorf("remove then add =\n%s\nwant\n%s", back, in)
	}
}

func TestResourceEditsRefuse(t *testing.T) {
	for name, c := range map[string]struct{ in, entry string }{
		"resources is a string":     {"resources: app.yaml\n", "b.yaml"},
		"resources holds a mapping": {"resources:\n- path: a.yaml\n", "b.yaml"},
		"not YAML":                  {"resources: [a.yaml\n", "b.yaml"},
		"not a mapping":             {"- a.yaml\n", "b.yaml"},
		"an empty entry":            {"resources: []\n", " "},
		"an entry of two lines":     {"resources: []\n", "a\nb"},
	} {
		if out, err := AddResource([]byte(c.in), c.entry); err == nil {
			t.Errorf("%s: AddResource gave %q, want an error", name, out)
		}
		if out, err := RemoveResource([]byte(c.in), c.entry); err == nil {
			t.Errorf("%s: RemoveResource gave %q, want an error", name, out)
		}
	}
}
