package layout

import (
	"errors"
	"strings"
	"testing"
)

func TestPathKeepsDNSNamesAsTheyAre(t *testing.T) {
	cases := []struct {
		name                               string
		group, resource, namespace, object string
		want                               string
	}{
		{"configmap", "", "configmaps", "default", "web", "clusters/prod/default/configmaps/web.yaml"},
		{"dots and dashes", "", "configmaps", "kube-system", "kube-root-ca.crt", "clusters/prod/kube-system/configmaps/kube-root-ca.crt.yaml"},
		{"grouped cluster-scoped", "rbac.authorization.k8s.io", "clusterroles", "", "cluster-admin", "clusters/prod/_cluster/clusterroles.rbac.authorization.k8s.io/cluster-admin.yaml"},
		{"250 characters fit exactly", "", "configmaps", "default", strings.Repeat("a", 250), "clusters/prod/default/configmaps/" + strings.Repeat("a", 250) + ".yaml"},
		{"device name inside a longer name", "", "configmaps", "default", "console", "clusters/prod/default/configmaps/console.yaml"},
		{"com10 is no device", "", "configmaps", "default", "com10", "clusters/prod/default/configmaps/com10.yaml"},
		{"upper case of custom resources", "example.com", "widgets", "team-a", "MyWidget_1", "clusters/prod/team-a/widgets.example.com/MyWidget_1.yaml"},
		// watch builds the folder of a selection from the path of "x" in namespace "*".
		{"scope of every namespace", "", "configmaps", "*", "x", "clusters/prod/*/configmaps/x.yaml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Path("clusters/prod", c.group, c.resource, c.namespace, c.object); got != c.want {
				t.Errorf("Path = %q, want %q", got, c.want)
			}
		})
	}
}

func TestPathEscapesWhatSomeFileSystemRefuses(t *testing.T) {
	cases := []struct {
		name                               string
		group, resource, namespace, object string
		want                               string // below clusters/prod
	}{
		{"rbac colons", "rbac.authorization.k8s.io", "clusterroles", "", "system:controller:x", "_cluster/clusterroles.rbac.authorization.k8s.io/system%3Acontroller%3Ax.yaml"},
		{"double colon", "rbac.authorization.k8s.io", "clusterroles", "", "system::x", "_cluster/clusterroles.rbac.authorization.k8s.io/system%3A%3Ax.yaml"},
		{"windows-forbidden characters", "example.com", "widgets", "team-a", `<>:"|?* \`, "team-a/widgets.example.com/%3C%3E%3A%22%7C%3F%2A%20%5C.yaml"},
		{"control characters", "example.com", "widgets", "team-a", "a\tb\nc\x00\x7f", "team-a/widgets.example.com/a%09b%0Ac%00%7F.yaml"},
		{"unicode byte by byte", "example.com", "widgets", "team-a", "café-日", "team-a/widgets.example.com/caf%C3%A9-%E6%97%A5.yaml"},
		{"invalid utf-8", "example.com", "widgets", "team-a", "a\xffb", "team-a/widgets.example.com/a%FFb.yaml"},
		{"tilde is the marker", "example.com", "widgets", "team-a", "~home", "team-a/widgets.example.com/%7Ehome.yaml"},
		{"percent and slash, never in a name, still reversible", "example.com", "widgets", "team-a", "100%/x", "team-a/widgets.example.com/100%25%2Fx.yaml"},
		{"device name", "", "configmaps", "default", "con", "default/configmaps/%63on.yaml"},
		{"device name in upper case", "", "configmaps", "default", "NUL", "default/configmaps/%4EUL.yaml"},
		{"device name with an extension", "", "configmaps", "default", "aux.txt", "default/configmaps/%61ux.txt.yaml"},
		{"numbered device", "", "configmaps", "default", "Lpt1", "default/configmaps/%4Cpt1.yaml"},
		{"device namespace", "", "configmaps", "prn", "web", "%70rn/configmaps/web.yaml"},
		{"device resource", "example.com", "com3", "team-a", "web", "team-a/%63om3.example.com/web.yaml"},
		{"dot in a resource", "example.com", "a.b", "team-a", "web", "team-a/a%2Eb.example.com/web.yaml"},
		{"folder edges", "example.com.", "widgets", "_cluster", "web", "%5Fcluster/widgets.example.com%2E/web.yaml"},
		{"dot folders", "", ".", "..", "web", "%2E%2E/%2E/web.yaml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Path("clusters/prod", c.group, c.resource, c.namespace, c.object); got != "clusters/prod/"+c.want {
				t.Errorf("Path = %q, want %q", got, "clusters/prod/"+c.want)
			}
			got, err := ParsePath("clusters/prod", "clusters/prod/"+c.want)
			want := ObjectPath{Namespace: c.namespace, Group: c.group, Resource: c.resource, Name: c.object}
			if err != nil || got != want {
				t.Errorf("ParsePath = %+v, %v; want %+v", got, err, want)
			}
		})
	}
}

func TestLongComponentsAreShortenedAndStayDistinct(t *testing.T) {
	long := strings.Repeat("a", 253)
	cases := []struct {
		name                               string
		group, resource, namespace, object string
		component                          int    // index below the base folder
		wantPrefix                         string // of the shortened component
	}{
		{"253-character name", "", "configmaps", "default", long, 2, strings.Repeat("a", 217)},
		{"multi-byte name is cut between characters", "example.com", "widgets", "team-a", strings.Repeat("é", 100), 2, strings.Repeat("%C3%A9", 36)},
		{"escapes are not split", "rbac.authorization.k8s.io", "clusterroles", "", "system:" + long, 2, "system%3A" + strings.Repeat("a", 208)},
		{"long resource.group", strings.Repeat("g", 63) + "." + strings.Repeat("h", 200), "widgets", "team-a", "web", 1, "widgets." + strings.Repeat("g", 63) + "." + strings.Repeat("h", 150)},
		{"long namespace", "", "configmaps", strings.Repeat("n", 300), "web", 0, strings.Repeat("n", 222)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Path("clusters/prod", c.group, c.resource, c.namespace, c.object)
			parts := strings.Split(strings.TrimPrefix(p, "clusters/prod/"), "/")
			comp := parts[c.component]
			if len(comp) > MaxComponent {
				t.Fatalf("component %q is %d bytes", comp, len(comp))
			}
			prefix, rest, ok := strings.Cut(comp, string(ShortenedMarker))
			if !ok || prefix != c.wantPrefix {
				t.Fatalf("component %q, want prefix %q then %q", comp, c.wantPrefix, string(ShortenedMarker))
			}
			if c.component == 2 && !strings.HasSuffix(rest, ".yaml") {
				t.Errorf("shortened file %q lost its .yaml", comp)
			}
			got, err := ParsePath("clusters/prod", p)
			if err != nil || !got.Shortened {
				t.Fatalf("ParsePath = %+v, %v; want shortened", got, err)
			}
			// Same prefix, another name: never the same path.
			other := Path("clusters/prod", c.group+"x", c.resource, c.namespace+"x", c.object+"x")
			if strings.Split(strings.TrimPrefix(other, "clusters/prod/"), "/")[c.component] == comp {
				t.Errorf("two long values share %q", comp)
			}
		})
	}
}

func TestParsePathRejectsWhatPathNeverWrites(t *testing.T) {
	cases := []struct {
		name, path string
		want       error
	}{
		{"another destination", "clusters/staging/default/configmaps/web.yaml", ErrOutsideBaseFolder},
		{"base folder as a name prefix", "clusters/production/default/configmaps/web.yaml", ErrOutsideBaseFolder},
		{"file at the top", "clusters/prod/README.md", ErrNotObjectPath},
		{"too shallow", "clusters/prod/default/web.yaml", ErrNotObjectPath},
		{"too deep", "clusters/prod/default/configmaps/extra/web.yaml", ErrNotObjectPath},
		{"not yaml", "clusters/prod/default/configmaps/web.yml", ErrNotObjectPath},
		{"no name", "clusters/prod/default/configmaps/.yaml", ErrNotObjectPath},
		{"no resource", "clusters/prod/default/.apps/web.yaml", ErrNotObjectPath},
		{"lower-case escape", "clusters/prod/_cluster/clusterroles/system%3ax.yaml", ErrNotObjectPath},
		{"truncated escape", "clusters/prod/default/configmaps/web%3.yaml", ErrNotObjectPath},
		{"raw colon", "clusters/prod/_cluster/clusterroles/system:x.yaml", ErrNotObjectPath},
		{"raw space", "clusters/prod/default/configmaps/a b.yaml", ErrNotObjectPath},
		{"needless escape", "clusters/prod/default/configmaps/%61.yaml", ErrNotObjectPath},
		{"raw device name", "clusters/prod/default/configmaps/con.yaml", ErrNotObjectPath},
		{"wildcard namespace", "clusters/prod/*/configmaps/web.yaml", ErrNotObjectPath},
		{"bad hash", "clusters/prod/default/configmaps/web~123.yaml", ErrNotObjectPath},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParsePath("clusters/prod", c.path)
			if !errors.Is(err, c.want) {
				t.Fatalf("ParsePath(%q) = %+v, %v; want %v", c.path, got, err, c.want)
			}
		})
	}
}

func TestParsePathOfEveryFolderLevel(t *testing.T) {
	cases := []struct {
		name, base, path string
		want             ObjectPath
	}{
		{"core namespaced", "clusters/prod", "clusters/prod/default/configmaps/web.yaml", ObjectPath{Namespace: "default", Resource: "configmaps", Name: "web"}},
		{"cluster scoped", "./clusters//prod/", "clusters/prod/_cluster/namespaces/team-a.yaml", ObjectPath{Resource: "namespaces", Name: "team-a"}},
		{"no base folder", "", "team-a/deployments.apps/web.yaml", ObjectPath{Namespace: "team-a", Group: "apps", Resource: "deployments", Name: "web"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParsePath(c.base, c.path)
			if err != nil || got != c.want {
				t.Fatalf("ParsePath = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

// FuzzPath checks the rule for any value, even with "/" and "%" that Kubernetes names never
// contain: short safe components, the exact inverse, and distinct paths for distinct names.
func FuzzPath(f *testing.F) {
	for _, s := range []string{"web", "system::x", "con", "café", "a\\b\x01", strings.Repeat("a", 253), strings.Repeat("日", 90)} {
		f.Add("widgets", "example.com", "team-a", s, s+"x")
	}
	f.Add("configmaps", "", "", "x", "x.")
	// Where names of safe bytes only stop being kept as they are.
	for _, s := range []string{"_x", ".x", "x.", "con.x", "COM1", "lpt10", "nul", strings.Repeat("b", 250), strings.Repeat("c", 251), strings.Repeat("d", 255)} {
		f.Add("widgets", s, s, s, s+"x")
		f.Add(s, "", "default", "web", "web2")
	}
	f.Fuzz(func(t *testing.T, resource, group, namespace, name, other string) {
		if resource == "" {
			t.Skip("every resource has a name")
		}
		p := Path("clusters/prod", group, resource, namespace, name)
		rest, ok := strings.CutPrefix(p, "clusters/prod/")
		if !ok {
			t.Fatalf("Path = %q, outside the base folder", p)
		}
		parts := strings.Split(rest, "/")
		if len(parts) != 3 {
			t.Fatalf("Path = %q, want 3 components below the base folder", p)
		}
		if want := escapedComponents(group, resource, namespace, name); want[0] != "" && want != [3]string(parts) {
			t.Fatalf("Path = %q, want the escaped components %q (a name kept as it is must be what escaping gives)", p, want)
		}
		for i, comp := range parts {
			if i == 0 && namespace == "*" {
				continue
			}
			checkComponent(t, comp)
		}
		if name != other && Path("clusters/prod", group, resource, namespace, other) == p {
			t.Fatalf("names %q and %q share %q", name, other, p)
		}
		if name == "" || namespace == "*" {
			return // no object has these: ParsePath rightly refuses them
		}
		got, err := ParsePath("clusters/prod", p)
		if err != nil {
			t.Fatalf("ParsePath(%q): %v", p, err)
		}
		if got.Shortened != strings.ContainsRune(p, ShortenedMarker) {
			t.Fatalf("ParsePath(%q).Shortened = %v", p, got.Shortened)
		}
		if want := (ObjectPath{Namespace: namespace, Group: group, Resource: resource, Name: name}); !got.Shortened && got != want {
			t.Fatalf("ParsePath(%q) = %+v, want %+v", p, got, want)
		}
	})
}

// escapedComponents are the namespace folder, kind folder and file name of an object as escaping
// token by token makes them, without the shortcut for names of safe bytes only; the first is
// empty for a namespace that has no folder of its own ("" and "*").
func escapedComponents(group, resource, namespace, name string) [3]string {
	kind := escape(resource, isSafeInResource)
	if group != "" {
		kind = append(append(kind, "."), escape(group, isSafe)...)
	}
	var folder string
	if namespace != "" && namespace != "*" {
		folder = fit(folderSafe(escape(namespace, isSafe)), "")
	}
	return [3]string{folder, fit(folderSafe(kind), ""), fit(deviceSafe(escape(name, isSafe)), fileSuffix)}
}

// checkComponent fails unless comp is at most MaxComponent bytes of safe bytes, escapes and at
// most one marker, and no name Windows refuses.
func checkComponent(t *testing.T, comp string) {
	t.Helper()
	if len(comp) == 0 || len(comp) > MaxComponent {
		t.Fatalf("component %q is %d bytes", comp, len(comp))
	}
	if strings.Count(comp, string(ShortenedMarker)) > 1 {
		t.Fatalf("component %q has more than one marker", comp)
	}
	for i := 0; i < len(comp); i++ {
		switch c := comp[i]; {
		case c == '%' && i+2 < len(comp) && unhex(comp[i+1]) >= 0 && unhex(comp[i+2]) >= 0:
			i += 2
		case c != '%' && (isSafe(c) || c == ShortenedMarker):
		default:
			t.Fatalf("component %q has raw byte %q at %d", comp, c, i)
		}
	}
	stem, _, _ := strings.Cut(comp, ".")
	if isDeviceName(stem) || strings.HasSuffix(comp, ".") || comp == "." || comp == ".." {
		t.Fatalf("component %q is refused by Windows", comp)
	}
}
