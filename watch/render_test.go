package watch

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configbutler/gitops-reverser/gitops"
	"github.com/configbutler/gitops-reverser/layout"
	"github.com/configbutler/gitops-reverser/sops"
)

var (
	configMapsGVR   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secretsGVR      = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	clusterRolesGVR = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
)

const secretValue = "hunter2-plaintext-password"

// renderManager publishes, as a reconcile would, two destinations: team/plain (a WatchRule in
// team-a for ConfigMaps, ClusterRoles only for delete, and a Secrets target without recipients
// that reconcile never makes) and team/sealed (a ClusterWatchRule for Secrets, sealed, and
// ConfigMaps without delete).
func renderManager(t *testing.T) *Manager {
	t.Helper()
	sealer, err := sops.NewSealer(bytes.Repeat([]byte("k"), sops.MinKeyBytes), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	plain := target{destination: "team/plain", baseFolder: "clusters/plain", ops: opAll}
	sealed := target{destination: "team/sealed", baseFolder: "clusters/sealed", ops: opAll}
	withOps := func(t target, o ops) target { t.ops = o; return t }
	withRecipients := func(t target) target { t.recipients = []string{id.Recipient().String()}; return t }
	sel := func(gvr schema.GroupVersionResource, kind string, namespaced bool, ns string) Selection {
		return Selection{GVR: gvr, Kind: kind, Namespaced: namespaced, Namespace: ns}
	}
	specs := map[string]*watcherSpec{}
	for _, s := range []*watcherSpec{
		{sel: sel(configMapsGVR, "ConfigMap", true, "team-a"), targets: []target{plain}},
		{sel: sel(clusterRolesGVR, "ClusterRole", false, ""), targets: []target{withOps(plain, opDelete)}},
		{sel: sel(secretsGVR, "Secret", true, "team-a"), targets: []target{plain}},
		{sel: sel(secretsGVR, "Secret", true, ""), targets: []target{withRecipients(sealed)}},
		{sel: sel(configMapsGVR, "ConfigMap", true, ""), targets: []target{withOps(sealed, opCreate|opUpdate)}},
	} {
		specs[s.sel.GVR.String()+"|"+s.sel.Namespace] = s
	}
	m := &Manager{opts: Options{Sealer: readySealer{sealer}}}
	m.publishSelections(specs)
	return m
}

// readySealer is the real sealer with its digest key already loaded, as the daemon's is.
type readySealer struct{ *sops.Sealer }

func (readySealer) Ready(context.Context) error { return nil }

func liveObject(apiVersion, kind, namespace, name string, fields map[string]any) *unstructured.Unstructured {
	meta := map[string]any{"name": name, "resourceVersion": "42", "uid": "0000"}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	obj := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
	for k, v := range fields {
		obj[k] = v
	}
	return &unstructured.Unstructured{Object: obj}
}

func liveConfigMap(namespace, name string) *unstructured.Unstructured {
	return liveObject("v1", "ConfigMap", namespace, name, map[string]any{"data": map[string]any{"color": "blue"}})
}

func TestRenderFollowsTheMirrorsRules(t *testing.T) {
	m := renderManager(t)
	owned := liveConfigMap("team-a", "owned")
	controller := true
	owned.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "1", Controller: &controller}})
	huge := liveConfigMap("team-a", "huge")
	huge.Object["data"] = map[string]any{"blob": strings.Repeat("x", gitops.MaxFileBytes)}
	cases := []struct {
		name, destination  string
		gvr                schema.GroupVersionResource
		namespace, objName string
		live               *unstructured.Unstructured
		wantOK             bool
		wantPath           string
		wantContent        string // a line the file holds; "" for a deletion
	}{
		{name: "a selected ConfigMap renders at the mirror's path", destination: "team/plain", gvr: configMapsGVR,
			namespace: "team-a", objName: "web", live: liveConfigMap("team-a", "web"), wantOK: true,
			wantPath: layout.Path("clusters/plain", "", "configmaps", "team-a", "web"), wantContent: "color: blue"},
		{name: "another version of the selected resource renders the same", destination: "team/plain",
			gvr: configMapsGVR.GroupResource().WithVersion("v2"), namespace: "team-a", objName: "web", live: liveConfigMap("team-a", "web"),
			wantOK: true, wantPath: layout.Path("clusters/plain", "", "configmaps", "team-a", "web"), wantContent: "color: blue"},
		{name: "a ClusterWatchRule's selection covers every namespace", destination: "team/sealed", gvr: configMapsGVR,
			namespace: "team-z", objName: "web", live: liveConfigMap("team-z", "web"), wantOK: true,
			wantPath: layout.Path("clusters/sealed", "", "configmaps", "team-z", "web"), wantContent: "color: blue"},
		{name: "a deleted object renders as its file's deletion", destination: "team/plain", gvr: configMapsGVR,
			namespace: "team-a", objName: "gone", wantOK: true, wantPath: layout.Path("clusters/plain", "", "configmaps", "team-a", "gone")},
		{name: "an unselected resource is not rendered", destination: "team/plain", gvr: schema.GroupVersionResource{Version: "v1", Resource: "services"},
			namespace: "team-a", objName: "web", live: liveObject("v1", "Service", "team-a", "web", nil)},
		{name: "an object outside the WatchRule's namespace is not rendered", destination: "team/plain", gvr: configMapsGVR,
			namespace: "team-b", objName: "web", live: liveConfigMap("team-b", "web")},
		{name: "a cluster-scoped selection covers no namespace", destination: "team/plain", gvr: clusterRolesGVR,
			namespace: "team-a", objName: "admin", live: liveObject("rbac.authorization.k8s.io/v1", "ClusterRole", "team-a", "admin", nil)},
		{name: "a Secret of a destination without recipients is not rendered", destination: "team/plain", gvr: secretsGVR,
			namespace: "team-a", objName: "db", live: liveSecret("team-a", "db")},
		{name: "a deletion needs the delete operation", destination: "team/sealed", gvr: configMapsGVR,
			namespace: "team-a", objName: "gone"},
		{name: "a deleted cluster-scoped object renders as its file's deletion", destination: "team/plain", gvr: clusterRolesGVR,
			objName: "gone", wantOK: true, wantPath: layout.Path("clusters/plain", "rbac.authorization.k8s.io", "clusterroles", "", "gone")},
		{name: "a write needs create or update", destination: "team/plain", gvr: clusterRolesGVR, objName: "admin",
			live: liveObject("rbac.authorization.k8s.io/v1", "ClusterRole", "", "admin", nil)},
		{name: "a generated object is not rendered", destination: "team/plain", gvr: configMapsGVR,
			namespace: "team-a", objName: "owned", live: owned},
		{name: "an object over the file cap is not rendered", destination: "team/plain", gvr: configMapsGVR,
			namespace: "team-a", objName: "huge", live: huge},
		{name: "an unknown destination renders nothing", destination: "team/other", gvr: configMapsGVR,
			namespace: "team-a", objName: "web", live: liveConfigMap("team-a", "web")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, ok, err := m.Render(tc.destination, tc.gvr, tc.namespace, tc.objName, tc.live)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v (change %q)", ok, tc.wantOK, c.Path)
			}
			if !ok {
				return
			}
			if c.Path != tc.wantPath {
				t.Errorf("path = %q, want %q", c.Path, tc.wantPath)
			}
			if tc.wantContent == "" && c.Content != nil {
				t.Errorf("content = %q, want a deletion", c.Content)
			}
			if tc.wantContent != "" && (!strings.Contains(string(c.Content), tc.wantContent) || strings.Contains(string(c.Content), "resourceVersion")) {
				t.Errorf("content = %q, want sanitized YAML holding %q", c.Content, tc.wantContent)
			}
			if !strings.HasPrefix(c.Summary, "restore "+tc.gvr.Resource+" ") || !c.Author.IsZero() || c.Trailers != nil {
				t.Errorf("summary %q, credit %+v", c.Summary, c.Credit)
			}
		})
	}
}

func liveSecret(namespace, name string) *unstructured.Unstructured {
	return liveObject("v1", "Secret", namespace, name, map[string]any{"type": "Opaque",
		"data": map[string]any{"password": base64.StdEncoding.EncodeToString([]byte(secretValue))}})
}

func TestRenderSealsTheSecretsOfAnEncryptingDestination(t *testing.T) {
	m := renderManager(t)
	c, ok, err := m.Render("team/sealed", secretsGVR, "team-b", "db", liveSecret("team-b", "db"))
	if err != nil || !ok {
		t.Fatalf("ok = %v, err = %v; want a sealed Secret", ok, err)
	}
	if want := layout.Path("clusters/sealed", "", "secrets", "team-b", "db"); c.Path != want {
		t.Errorf("path = %q, want %q", c.Path, want)
	}
	for _, plain := range []string{secretValue, base64.StdEncoding.EncodeToString([]byte(secretValue))} {
		if strings.Contains(string(c.Content), plain) {
			t.Fatalf("the sealed document holds the plaintext %q:\n%s", plain, c.Content)
		}
	}
	if !strings.Contains(string(c.Content), "sops:") || c.Keep == nil || !c.Keep(c.Content) {
		t.Errorf("want a SOPS document that keeps itself, got keep=%v:\n%s", c.Keep != nil, c.Content)
	}
}

func TestRenderRefusesAnotherObjectThanItNames(t *testing.T) {
	m := renderManager(t)
	for name, live := range map[string]*unstructured.Unstructured{
		"another name":      liveConfigMap("team-a", "other"),
		"another namespace": liveConfigMap("team-b", "web"),
		"another kind":      liveSecret("team-a", "web"), // a Secret must not reach the ConfigMaps' files in plain text
	} {
		if c, ok, err := m.Render("team/plain", configMapsGVR, "team-a", "web", live); err == nil || ok {
			t.Errorf("%s: ok = %v, err = %v, content %q; want an error", name, ok, err, c.Content)
		}
	}
}

func TestSelectionsAreEachDestinationsOwn(t *testing.T) {
	m := renderManager(t)
	got := m.Selections("team/sealed")
	if len(got) != 2 {
		t.Fatalf("selections of team/sealed = %v, want 2", names(got))
	}
	for _, s := range got {
		if want := map[string]ops{"secrets": opAll, "configmaps": opCreate | opUpdate}[s.GVR.Resource]; s.Ops != want {
			t.Errorf("%s: ops %v, want %v", s.GVR.Resource, s.Ops.Operations(), want.Operations())
		}
	}
	if m.Selections("team/other") != nil {
		t.Error("an unknown destination has selections")
	}
}
